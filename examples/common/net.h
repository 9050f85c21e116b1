/* SPDX-License-Identifier: MIT */
/*
 * net.h - the examples' TCP sockets, all on 127.0.0.1: a listening
 * socket for the servers, a connected one for the clients. Plain
 * system calls; what runs on a ring is in acceptor.h.
 */
#ifndef EXAMPLES_NET_H
#define EXAMPLES_NET_H

/*
 * Listens on 127.0.0.1:port (0: a free one, told in *bound_port), with
 * SO_REUSEADDR and a backlog of 511. Returns the descriptor; a failure
 * ends the program, naming the step.
 */
int net_listen(int port, int *bound_port);

/*
 * A blocking TCP socket connected to 127.0.0.1:port. With timeout_s >
 * 0 its connect, sends and receives give up after that long (then
 * fail with EAGAIN). Returns the descriptor or a negative errno.
 */
int net_connect(int port, int timeout_s);

/* Replies go out at once: small requests and replies, pipelined. */
void net_nodelay(int fd);

#endif /* EXAMPLES_NET_H */
