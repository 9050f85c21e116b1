/* SPDX-License-Identifier: MIT */
/*
 * check_redis_slot.c - Redis Cluster key slots (libaggring-redis).
 *
 * The expected slots are the ones `redis-cli CLUSTER KEYSLOT` prints
 * (Redis 7.0), and the CRC16 check value is the XMODEM one the cluster
 * specification gives ("123456789" -> 0x31c3).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/redis.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define S(lit) lit, sizeof(lit) - 1

struct slot_case {
	const char *key;
	size_t len;
	unsigned slot;
};

static const struct slot_case slots[] = {
	{ S(""), 0 },
	{ S("123456789"), 0x31c3 & 16383 },
	{ S("foo"), 12182 },
	{ S("bar"), 5061 },
	{ S("hello"), 866 },
	{ S("tck.mock_aggregate:command"), 7871 },
	/* the tag decides */
	{ S("{user1000}.following"), 3443 },
	{ S("{user1000}.followers"), 3443 },
	{ S("user1000"), 3443 },
	/* "{}" is no tag: the whole key */
	{ S("foo{}{bar}"), 8363 },
	/* the first '{' and the first '}' after it: tag "{bar" */
	{ S("foo{{bar}}zap"), 4015 },
	/* only the first tag counts: "bar" */
	{ S("foo{bar}{zap}"), 5061 },
	/* an open brace without a close one: the whole key */
	{ S("foo{bar"), 15278 },
	/* binary-safe: a NUL inside the key */
	{ S("a\0b"), 8383 },
};

START_TEST(test_key_slot_table)
{
	const struct slot_case *c = &slots[_i];

	ck_assert_msg(agr_redis_key_slot(c->key, c->len) == c->slot,
		      "slot of case %d: %u, expected %u", _i,
		      agr_redis_key_slot(c->key, c->len), c->slot);
}
END_TEST

START_TEST(test_key_slot_range)
{
	char key[32];

	for (unsigned i = 0; i < 100000; i++) {
		int n = snprintf(key, sizeof(key), "key:%u", i);

		ck_assert_uint_lt(agr_redis_key_slot(key, (size_t)n), 16384);
	}
	ck_assert_uint_eq(agr_redis_key_slot(NULL, 0), 0);
}
END_TEST

static Suite *slot_suite(void)
{
	Suite *s = suite_create("redis_slot");
	TCase *tc = tcase_create("slot");

	tcase_add_loop_test(tc, test_key_slot_table, 0, ARRAY_SIZE(slots));
	tcase_add_test(tc, test_key_slot_range);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(slot_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
