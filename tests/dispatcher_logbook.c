/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_logbook.c - what the library logged, kept word for word
 * for check_dispatcher's tests to wait for and read.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "dispatcher_test.h"
#include "testutil.h"

/* ==== misuse refused, and a force stop bounds every message ==== */

/* ---- what the library logged, word for word ---- */

struct tu_logbook logbook;

void logbook_open(void)
{
	tu_logbook_clear(&logbook);
	agr_set_log_hook(tu_logbook_keep, &logbook);
}

void logbook_close(void)
{
	agr_set_log_hook(NULL, NULL);
}
