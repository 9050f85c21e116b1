/* SPDX-License-Identifier: MIT */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "util.h"

static struct sockaddr_in loopback(int port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_port = htons((uint16_t)port),
				     .sin_addr.s_addr =
					     htonl(INADDR_LOOPBACK) };
}

int net_listen(int port, int *bound_port)
{
	struct sockaddr_in sa = loopback(port);
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind 127.0.0.1:%d: %s", port, strerror(errno));
	if (listen(fd, 511) < 0)
		die("listen: %s", strerror(errno));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	*bound_port = ntohs(sa.sin_port);
	return fd;
}

int net_connect(int port, int timeout_s)
{
	struct sockaddr_in sa = loopback(port);
	struct timeval tv = { .tv_sec = timeout_s };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	if (fd < 0)
		return -errno;
	if (timeout_s > 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

void net_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}
