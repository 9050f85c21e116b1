/* SPDX-License-Identifier: MIT */
/*
 * wow_codec_test.h - what the files of check_wow_codec share
 * (check_wow_codec.c, wow_codec_events.c).
 */
#ifndef TESTS_WOW_CODEC_TEST_H
#define TESTS_WOW_CODEC_TEST_H

#include <check.h>
#include <stddef.h>

#include <aggring/redis.h>

#include "wow_spec_docs.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* wow_codec_events.c */
void wow_codec_event_tests(TCase *json);

#endif /* TESTS_WOW_CODEC_TEST_H */
