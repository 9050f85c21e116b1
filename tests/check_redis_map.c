/* SPDX-License-Identifier: MIT */
/*
 * check_redis_map.c - libaggring-redis's slot map without a server:
 * CLUSTER SHARDS and CLUSTER SLOTS replies (RESP2, as Redis 7.0 and 6.2
 * send them) read into the map, replies of other shapes refused
 * without changing it, and MOVED/ASK errors parsed. Built with
 * redis/cluster.c itself, to reach its internal entry points.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "../redis/cluster.h"

static redisReply *parse(const char *resp)
{
	redisReader *rd = redisReaderCreate();
	void *reply = NULL;

	ck_assert_ptr_nonnull(rd);
	ck_assert_int_eq(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
	ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
	ck_assert_ptr_nonnull(reply);
	redisReaderFree(rd);
	return reply;
}

/* Two shards; the second has a replica listed first, and no endpoint. */
static const char shards[] =
	"*2\r\n"
	"*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:16383\r\n"
	"$5\r\nnodes\r\n*1\r\n"
	"*10\r\n$2\r\nid\r\n$3\r\naaa\r\n$4\r\nport\r\n:7000\r\n"
	"$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
	"$4\r\nrole\r\n$6\r\nmaster\r\n"
	"*4\r\n$5\r\nslots\r\n*2\r\n:100\r\n:199\r\n"
	"$5\r\nnodes\r\n*2\r\n"
	"*6\r\n$4\r\nport\r\n:7002\r\n$2\r\nip\r\n$9\r\n127.0.0.3\r\n"
	"$4\r\nrole\r\n$7\r\nreplica\r\n"
	"*8\r\n$4\r\nport\r\n:7001\r\n$2\r\nip\r\n$9\r\n127.0.0.2\r\n"
	"$8\r\nendpoint\r\n$1\r\n?\r\n$4\r\nrole\r\n$6\r\nmaster\r\n";

START_TEST(shards_fill_the_map)
{
	struct agr__redis_map *m;
	redisReply *r = parse(shards);
	struct agr__redis_node *a, *b;

	ck_assert_int_eq(agr__redis_map_new(&m), 0);
	ck_assert_int_eq(agr__redis_map_load(m, r, true, "seed"), 0);
	ck_assert_uint_eq(agr__redis_map_covered(m), 16384);
	ck_assert_uint_eq(agr__redis_map_count(m), 2); /* no replica */
	a = agr__redis_map_slot(m, 0);
	b = agr__redis_map_slot(m, 150);
	ck_assert_str_eq(agr__redis_node_host(a), "127.0.0.1");
	ck_assert_int_eq(agr__redis_node_port(a), 7000);
	/* "?" is no endpoint: the ip */
	ck_assert_str_eq(agr__redis_node_host(b), "127.0.0.2");
	ck_assert_int_eq(agr__redis_node_port(b), 7001);
	ck_assert_ptr_eq(agr__redis_map_slot(m, 99), a);
	ck_assert_ptr_eq(agr__redis_map_slot(m, 100), b);
	ck_assert_ptr_eq(agr__redis_map_slot(m, 199), b);
	ck_assert_ptr_eq(agr__redis_map_slot(m, 200), a);
	ck_assert_ptr_eq(agr__redis_map_slot(m, 16383), a);
	ck_assert_ptr_null(agr__redis_map_slot(m, 16384));
	freeReplyObject(r);
	agr__redis_map_free(m, NULL);
}
END_TEST

/* CLUSTER SLOTS: an empty address means the node that answered. */
static const char slots[] =
	"*2\r\n"
	"*3\r\n:0\r\n:8191\r\n*3\r\n$0\r\n\r\n:7000\r\n$3\r\naaa\r\n"
	"*4\r\n:8192\r\n:16383\r\n*3\r\n$9\r\n127.0.0.2\r\n:7001\r\n$3\r\nbbb\r\n"
	"*3\r\n$9\r\n127.0.0.3\r\n:7002\r\n$3\r\nccc\r\n";

START_TEST(slots_fill_the_map)
{
	struct agr__redis_map *m;
	redisReply *r = parse(slots);

	ck_assert_int_eq(agr__redis_map_new(&m), 0);
	ck_assert_int_eq(agr__redis_map_load(m, r, false, "10.0.0.9"), 0);
	ck_assert_uint_eq(agr__redis_map_covered(m), 16384);
	ck_assert_str_eq(agr__redis_node_host(agr__redis_map_slot(m, 5)),
			 "10.0.0.9");
	ck_assert_int_eq(agr__redis_node_port(agr__redis_map_slot(m, 5)), 7000);
	ck_assert_str_eq(agr__redis_node_host(agr__redis_map_slot(m, 9000)),
			 "127.0.0.2");
	ck_assert_uint_eq(agr__redis_map_count(m), 2); /* not the replica */
	freeReplyObject(r);
	agr__redis_map_free(m, NULL);
}
END_TEST

START_TEST(bad_replies_leave_the_map)
{
	static const char *bad[] = {
		"+OK\r\n",
		/* a range past the last slot */
		"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",
		/* lo > hi */
		"*1\r\n*3\r\n:9\r\n:3\r\n*2\r\n$1\r\nh\r\n:1\r\n",
		/* no port */
		"*1\r\n*3\r\n:0\r\n:3\r\n*1\r\n$1\r\nh\r\n",
		/* a port out of range */
		"*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:70000\r\n",
	};
	struct agr__redis_map *m;
	redisReply *good = parse(slots);

	ck_assert_int_eq(agr__redis_map_new(&m), 0);
	ck_assert_int_eq(agr__redis_map_load(m, good, false, "h"), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		redisReply *r = parse(bad[i]);

		ck_assert_int_eq(agr__redis_map_load(m, r, false, "h"), -EPROTO);
		ck_assert_uint_eq(agr__redis_map_covered(m), 16384);
		ck_assert_int_eq(agr__redis_node_port(agr__redis_map_slot(m, 1)),
				 7000);
		freeReplyObject(r);
	}
	freeReplyObject(good);
	agr__redis_map_free(m, NULL);
}
END_TEST

START_TEST(moved_and_ask_parse)
{
	char host[64];
	unsigned slot;
	int port;

#define REDIRECT(s) agr__redis_parse_redirect(s, strlen(s), &slot, host, \
					      sizeof(host), &port)
	ck_assert_int_eq(REDIRECT("MOVED 3999 127.0.0.1:6381"), 1);
	ck_assert_uint_eq(slot, 3999);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_int_eq(port, 6381);
	ck_assert_int_eq(REDIRECT("ASK 16383 ::1:7000"), 2);
	ck_assert_uint_eq(slot, 16383);
	ck_assert_str_eq(host, "::1");
	ck_assert_int_eq(port, 7000);
	ck_assert_int_eq(REDIRECT("ERR wrong type"), 0);
	ck_assert_int_eq(REDIRECT("MOVED 16384 h:1"), 0);
	ck_assert_int_eq(REDIRECT("MOVED 1 h:"), 0);
	ck_assert_int_eq(REDIRECT("MOVED 1 :5"), 0);
	ck_assert_int_eq(REDIRECT("MOVED 1 h:99999"), 0);
	ck_assert_int_eq(REDIRECT("MOVED x h:1"), 0);
	ck_assert_int_eq(REDIRECT("MOVED 1"), 0);
	ck_assert_int_eq(REDIRECT("ASK"), 0);
#undef REDIRECT
}
END_TEST

static Suite *map_suite(void)
{
	Suite *s = suite_create("redis_map");
	TCase *tc = tcase_create("map");

	tcase_add_test(tc, shards_fill_the_map);
	tcase_add_test(tc, slots_fill_the_map);
	tcase_add_test(tc, bad_replies_leave_the_map);
	tcase_add_test(tc, moved_and_ask_parse);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(map_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
