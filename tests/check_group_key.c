/* SPDX-License-Identifier: MIT */
/*
 * check_group_key.c - the group key must agree with the JVM reference.
 *
 * Every expected value below was printed by Java 17 (OpenJDK 17.0.15):
 * the hashes by new String(bytes, StandardCharsets.UTF_8).hashCode(),
 * the keys by Math.floorMod(hash, parallelism). For the random cases the
 * Java program ran the same xorshift generators as this file, so only
 * the hashes need to be stored here.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/group_key.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A string literal and its length, NULs included. */
#define S(lit) lit, sizeof(lit) - 1

struct hash_case {
	const char *id;
	size_t len;
	int32_t hash;
};

static const struct hash_case java_hashes[] = {
	/* generated from Java 17: new String(bytes, UTF_8).hashCode() */
	{ S(""), 0 },
	{ S("a"), 97 },
	{ S("abc"), 96354 },
	{ S("order-1"), -1207111310 },
	{ S("hello world"), 1794106052 },
	{ S("Order"), 76453678 },
	{ S("order-8nuof79"), -7 },
	{ S("polygenelubricants"), INT32_MIN },
	{ S("The quick brown fox jumps over the lazy dog"), -609428141 },
	{ S("aggregate-0001"), -31232177 },
	{ S("tenant/order/42"), 1748425892 },
	{ S("a\x00" "b"), 93315 },
	{ S("café"), 3045921 },
	{ S("Ñandú"), 196014676 },
	{ S("naïve"), 104710475 },
	{ S("Zürich"), -1482116162 },
	{ S("订单"), 1129459 },
	{ S("注文"), 890271 },
	{ S("주문"), 1642940 },
	{ S("😀"), 1772899 },
	{ S("a😀b"), 57849694 },
	{ S("👍🏽"), 1705111281 },
	{ S("𝄞"), 1772394 },
	{ S("\xc2\x80"), 128 },
	{ S("\xdf\xbf"), 2047 },
	{ S("\xe0\xa0\x80"), 2048 },
	{ S("\xed\x9f\xbf"), 55295 },
	{ S("\xee\x80\x80"), 57344 },
	{ S("\xef\xbf\xbf"), 65535 },
	{ S("\xf0\x90\x80\x80"), 1770496 },
	{ S("\xf4\x8f\xbf\xbf"), 1803232 },
	{ S("\xff"), 65533 },
	{ S("a\xc3"), 68540 },
	{ S("\xe2\x82"), 65533 },
	{ S("\xe2\x82" "A"), 2031588 },
	{ S("\xed\xa0\x80"), 65533 },
	{ S("\xed\xbf\xbf"), 65533 },
	{ S("\xed\xa0" "A"), 2031588 },
	{ S("\xed\xa0"), 65533 },
	{ S("\xed\xa0\xbd\xed\xb8\x80"), 2097056 },
	{ S("\xc0\xaf"), 2097056 },
	{ S("\xc1\xbf"), 2097056 },
	{ S("\xe0\x80\x80"), 65074269 },
	{ S("\xe0\x9f\xbf"), 65074269 },
	{ S("\xf0\x80\x80\x80"), 2017367872 },
	{ S("\xf0\x8f\xbf\xbf"), 2017367872 },
	{ S("\xf4\x90\x80\x80"), 2017367872 },
	{ S("\xf5\x80\x80\x80"), 2017367872 },
	{ S("\xf8\x88\x80\x80\x80"), -1886039875 },
	{ S("\x80"), 65533 },
	{ S("\xbf\x80"), 2097056 },
	{ S("\xfe\xff"), 2097056 },
	{ S("\xf0\x9f\x98"), 65533 },
	{ S("\xf0\x9f\x98" "A"), 2031588 },
	{ S("\xf0\x9f" "A"), 2031588 },
	{ S("\xf0" "A"), 2031588 },
	{ S("\xc3" "A"), 2031588 },
	{ S("order-\xff-1"), -329867422 },
};

/* Keys for each of these parallelisms, Math.floorMod in Java 17. */
static const int key_parallelisms[] = { 1, 3, 4, 7, 64, 1000, INT_MAX };
#define NKEYS ARRAY_SIZE(key_parallelisms)

struct key_case {
	const char *id;
	int key[NKEYS];
};

/* "order-8nuof79" hashes to -7; "polygenelubricants" to INT32_MIN. */
static const struct key_case java_keys[] = {
	{ "order-8nuof79", { 0, 2, 1, 0, 57, 993, 2147483640 } },
	{ "polygenelubricants", { 0, 1, 0, 5, 0, 352, 2147483646 } },
	{ "order-1", { 0, 1, 2, 1, 50, 690, 940372337 } },
	{ "hello world", { 0, 2, 0, 4, 4, 52, 1794106052 } },
};

/* Java hashes of the strings random_utf8() makes from seed 0x2545f491. */
static const int32_t java_utf8_hashes[256] = {
	1573741450, 1728313242, 25821174, 1835259817, 1344, -456092941,
	1203711111, 55815108, 67, 428067634, -1407424228, 1840342372,
	435653901, -575965228, 384392687, -805432198, 1930007836, -1232480479,
	-920806990, 86845728, 1100815271, -653259640, 46992, 1775379,
	-919786396, -1839217423, 5, -1346716435, -1405590183, 857429062,
	1712655785, -1148444074, 15499, 58178878, -820286917, 701182253,
	-490064279, -779249753, 1275757457, -83729826, -330660642, -806541625,
	-868652236, 4264, 1392631258, 497879751, 2327, -1016975051,
	-1746698775, 465551, -2139319492, -129942061, -455652186, 454747456,
	55265145, 1929960734, -76448203, 1829048385, 3379309, -47801966,
	1405219839, -1763014104, -1956777475, -1816473946, 1834068578,
	1339527128, 1239, 1913791229, -1241302507, -192777709, 32314709,
	-1212936620, 967880, 844459622, -843623265, 1801578, 757237557,
	1790422, 30648020, 639670440, 237494008, -360222216, -12503425,
	-1657810399, -520537626, 7, -2111729584, -129346991, 3745, 1389556526,
	-2083930302, 446, -777387841, -368630884, -734290470, 1972777925,
	1604792495, 2145135849, -618001355, 933714292, 1775044391, 954110268,
	1787216, 193533, 1000164335, 1448274116, 1519632255, 1041003443,
	-35456691, 1464624432, -1794415403, 761338569, 31881, 1649857288,
	1231365611, 550, 1506789, 78, -2129230244, 265991816, 1274036637,
	1174435870, -1787622899, 711330703, 435614432, -342987763, -267253662,
	-1667394207, 243705959, 607635337, -1261137251, 1712094895, 1438296362,
	1167667958, -939471573, 2129373504, 1336629220, 739, -1772364941,
	-81288460, -1727417294, 267523061, 1712748925, 1270483295, 42375915,
	405025143, 43553, 1900074842, 743761, -1124225318, 1630232887, 228615,
	517577597, 1784408, -503639740, 935288330, -1111389234, -653839433,
	55212196, 1987648390, 2061037, 1847433, -917700384, -1829650558,
	-2002310778, 8, 52544619, 1366893, 1783719, 106, 343856818,
	-1662709517, -1991812565, 2080985872, -1042087034, 913490932,
	-2084216139, -600944037, -1872028215, -233610241, 12517, -2053867897,
	-1546466040, 1437422599, -292289464, 160895671, 2072206106, -891815317,
	1264553555, 1484939448, -448893268, -1637221750, -49041332, 613660333,
	-545778983, 55427974, 55209492, 63048, 55853347, 290970635,
	-2018776304, -2004013066, 1117, -1502251562, 1332348549, -986293141,
	-355122629, -531253519, 438195127, -404305389, 49020, -154290188,
	-738713016, 61062, 229520633, 27464, 1393095643, 115, 2031674761,
	70920441, 1595730265, 1795622, 668, 4886235, 29727348, 1513268,
	520475378, 1792465, -1380971780, 1994524522, -1730655975, -1825937581,
	-477263449, 1504742269, -1022514066, 1086744656, 1422711628, 832515,
	-307719967, 616939573, 1797254, -43698389, 824445373, 1327237047, 17,
	856643478, -1039352968, 1802040, -2044684714, -110377676, 293963175,
	1712933117, -1154124812, 1266586, 1422254067, 466793136,
};

/* Java hashes of the strings random_bytes() makes from seed 0x9e3779b9. */
static const int32_t java_bytes_hashes[128] = {
	500340435, 1462898726, -1957601665, 65533, 8762643, -780047478,
	950007410, -151865523, 0, 1262172944, 91654550, 1374280101, 65533,
	2031633, 68819, 9141186, 2097056, -1706890541, 1952425018, -650860121,
	0, -1842547202, -1947341104, 65074269, 16872625, 447104700, -194470350,
	31025419, 588090300, -152374802, 1954512706, -1951000406, 1820837549,
	-1116067592, 65074269, 2015336442, 2097056, -1809136425, 1953574398,
	-1957219862, 456931728, 999024472, -468160770, 1528, -1949057581,
	68827935, 0, 632112884, -415324442, 0, 5114596, 1701888842, 910313108,
	-2281728, -6023907, 2030985041, 1769826485, 1954397386, 1083764922,
	-1985146227, 1137227544, 1729253583, 65009587, 22, 65074269, -44892418,
	-123673647, -1556219217, 99943, -1052415851, 2017367872, 479872144,
	65533, -580259763, 1660276500, 65533, -68929045, -2100895582,
	1296925590, 857001805, 2097056, 2024756040, 2015274018, 1918710039, 0,
	0, 2097056, 65533, 2015336659, 1376093397, 976142488, -1208465187, 0,
	269809639, 1660340277, 1662371552, 0, 0, -452981570, 65074269,
	453056976, -1888136547, 2032617, -1863501264, 1561912683, 175571192,
	-1886039875, 89284770, 344419955, 0, 2097056, 1044161789, -1629709336,
	65533, 1161328923, 897144532, -260353789, 0, 0, -249607630,
	-1449406746, -951674140, 395493076, -881649220, 2120620037, 0,
	-1949007478, 0,
};

/*
 * xorshift32, written the same way in the Java program that produced the
 * tables above (int arithmetic, >>> for the right shift).
 */
static uint32_t xorshift32(uint32_t *state)
{
	uint32_t x = *state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *state = x;
}

/* Java: Integer.remainderUnsigned(next(), n). */
static uint32_t rnd_below(uint32_t *state, uint32_t n)
{
	return xorshift32(state) % n;
}

static size_t put_utf8(uint8_t *p, uint32_t cp)
{
	if (cp < 0x80) {
		p[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		p[0] = (uint8_t)(0xc0 | cp >> 6);
		p[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		p[0] = (uint8_t)(0xe0 | cp >> 12);
		p[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		p[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	p[0] = (uint8_t)(0xf0 | cp >> 18);
	p[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	p[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	p[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/* 1 to 12 code points, every UTF-8 length equally likely; no surrogates. */
static size_t random_utf8(uint32_t *state, uint8_t buf[48])
{
	uint32_t n = 1 + rnd_below(state, 12);
	size_t len = 0;
	uint32_t cp;

	while (n--) {
		switch (rnd_below(state, 4)) {
		case 0:
			cp = rnd_below(state, 0x80);
			break;
		case 1:
			cp = 0x80 + rnd_below(state, 0x800 - 0x80);
			break;
		case 2:
			cp = 0x800 + rnd_below(state, 0x10000 - 0x800 - 0x800);
			if (cp >= 0xd800)
				cp += 0x800;
			break;
		default:
			cp = 0x10000 + rnd_below(state, 0x100000);
			break;
		}
		len += put_utf8(buf + len, cp);
	}
	return len;
}

/*
 * 0 to 15 bytes drawn so that lead bytes, continuation bytes and the
 * bytes whose second-byte ranges are special meet often: mostly
 * ill-formed, sometimes well-formed.
 */
static size_t random_bytes(uint32_t *state, uint8_t buf[16])
{
	static const uint8_t special[] = {
		0xe0, 0xed, 0xf0, 0xf4, 0xa0, 0x9f, 0x8f, 0x90,
	};
	size_t len = rnd_below(state, 16);
	size_t i;

	for (i = 0; i < len; i++) {
		switch (rnd_below(state, 4)) {
		case 0:
			buf[i] = (uint8_t)rnd_below(state, 0x80);
			break;
		case 1:
			buf[i] = (uint8_t)(0x80 + rnd_below(state, 0x40));
			break;
		case 2:
			buf[i] = (uint8_t)(0xc0 + rnd_below(state, 0x40));
			break;
		default:
			buf[i] = special[rnd_below(state, ARRAY_SIZE(special))];
			break;
		}
	}
	return len;
}

/* floorMod done independently of the library, in 64-bit arithmetic. */
static int64_t floor_mod64(int64_t x, int64_t m)
{
	int64_t r = x % m;

	return r < 0 ? r + m : r;
}

START_TEST(test_java_hash_table)
{
	const struct hash_case *c = &java_hashes[_i];

	ck_assert_msg(agr_java_string_hash(c->id, c->len) == c->hash,
		      "case %d: hash %d, Java says %d", _i,
		      (int)agr_java_string_hash(c->id, c->len), (int)c->hash);
}
END_TEST

START_TEST(test_java_key_table)
{
	const struct key_case *c = &java_keys[_i];
	size_t j;
	int p;

	for (j = 0; j < NKEYS; j++) {
		p = key_parallelisms[j];
		ck_assert_msg(agr_group_key(c->id, p) == c->key[j],
			      "%s, %d: key %d, Java says %d", c->id, p,
			      agr_group_key(c->id, p), c->key[j]);
		ck_assert_int_eq(agr_group_key_n(c->id, strlen(c->id), p),
				 c->key[j]);
	}
}
END_TEST

START_TEST(test_empty_and_null)
{
	ck_assert_int_eq(agr_java_string_hash(NULL, 0), 0);
	ck_assert_int_eq(agr_java_string_hash(NULL, 5), 0);
	ck_assert_int_eq(agr_java_string_hash("", 0), 0);
	ck_assert_int_eq(agr_java_string_hash("abc", 0), 0);
	ck_assert_int_eq(agr_group_key("", 7), 0);
}
END_TEST

START_TEST(test_negative_hash_floor_mod)
{
	int p;

	ck_assert_int_eq(agr_java_string_hash(S("order-8nuof79")), -7);
	ck_assert_int_eq(agr_group_key("order-8nuof79", 4), 1);
	ck_assert_int_eq(agr_group_key("order-8nuof79", 7), 0);
	ck_assert_int_eq(agr_group_key("order-8nuof79", INT_MAX), INT_MAX - 7);
	for (p = 1; p <= 1000; p++) {
		ck_assert_int_eq(agr_group_key("order-8nuof79", p),
				 floor_mod64(-7, p));
		ck_assert_int_eq(agr_group_key("polygenelubricants", p),
				 floor_mod64(INT32_MIN, p));
	}
}
END_TEST

START_TEST(test_parallelism_one)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(java_hashes); i++)
		ck_assert_int_eq(agr_group_key_n(java_hashes[i].id,
						 java_hashes[i].len, 1), 0);
}
END_TEST

START_TEST(test_invalid_arguments)
{
	ck_assert_int_eq(agr_group_key("order-1", 0), -EINVAL);
	ck_assert_int_eq(agr_group_key("order-1", -1), -EINVAL);
	ck_assert_int_eq(agr_group_key("order-1", INT_MIN), -EINVAL);
	ck_assert_int_eq(agr_group_key(NULL, 4), -EINVAL);
	ck_assert_int_eq(agr_group_key(NULL, 0), -EINVAL);
	ck_assert_int_eq(agr_group_key_n("order-1", 7, 0), -EINVAL);
	ck_assert_int_eq(agr_group_key_n("order-1", 7, -4), -EINVAL);
	ck_assert_int_eq(agr_group_key_n(NULL, 0, 4), -EINVAL);
	ck_assert_int_eq(agr_group_key_n(NULL, 3, 4), -EINVAL);
}
END_TEST

/* The _n variant hashes past a NUL; the plain one stops at it. */
START_TEST(test_embedded_nul)
{
	ck_assert_int_eq(agr_group_key_n(S("a\0b"), INT_MAX), 93315);
	ck_assert_int_eq(agr_group_key("a\0b", INT_MAX), 97);
}
END_TEST

START_TEST(test_random_utf8_matches_java)
{
	uint32_t state = 0x2545f491;
	uint8_t buf[48];
	size_t i, len;
	int32_t h;

	for (i = 0; i < ARRAY_SIZE(java_utf8_hashes); i++) {
		len = random_utf8(&state, buf);
		h = agr_java_string_hash((const char *)buf, len);
		ck_assert_msg(h == java_utf8_hashes[i],
			      "string %zu: hash %d, Java says %d", i, (int)h,
			      (int)java_utf8_hashes[i]);
	}
}
END_TEST

START_TEST(test_random_bytes_match_java)
{
	uint32_t state = 0x9e3779b9;
	uint8_t buf[16];
	size_t i, len;
	int32_t h;

	for (i = 0; i < ARRAY_SIZE(java_bytes_hashes); i++) {
		len = random_bytes(&state, buf);
		h = agr_java_string_hash((const char *)buf, len);
		ck_assert_msg(h == java_bytes_hashes[i],
			      "string %zu: hash %d, Java says %d", i, (int)h,
			      (int)java_bytes_hashes[i]);
	}
}
END_TEST

/*
 * Any input and any parallelism give a key in range, equal to floorMod
 * computed apart from the library. Failures are counted rather than
 * asserted one by one, to keep Check's per-assertion cost out of the loop.
 */
START_TEST(test_random_keys_in_range)
{
	uint32_t state = 0xdeadbeef;
	uint8_t buf[48];
	long bad = 0, first_bad = -1;
	long i;
	size_t len;
	int p, key;
	int32_t h;

	for (i = 0; i < 100000; i++) {
		if (i & 1)
			len = random_utf8(&state, buf);
		else
			len = random_bytes(&state, buf);
		h = agr_java_string_hash((const char *)buf, len);
		p = (i % 10 == 9) ? INT_MAX
				  : (int)(1 + rnd_below(&state, 100000));
		key = agr_group_key_n((const char *)buf, len, p);
		if (key < 0 || key >= p || key != floor_mod64(h, p)) {
			if (first_bad < 0)
				first_bad = i;
			bad++;
		}
	}
	ck_assert_msg(bad == 0, "%ld bad keys, the first at string %ld", bad,
		      first_bad);
}
END_TEST

static Suite *group_key_suite(void)
{
	Suite *s = suite_create("group_key");
	TCase *java = tcase_create("java");
	TCase *key = tcase_create("key");
	TCase *random = tcase_create("random");

	tcase_add_loop_test(java, test_java_hash_table, 0,
			    ARRAY_SIZE(java_hashes));
	tcase_add_loop_test(java, test_java_key_table, 0,
			    ARRAY_SIZE(java_keys));
	tcase_add_test(java, test_random_utf8_matches_java);
	tcase_add_test(java, test_random_bytes_match_java);
	suite_add_tcase(s, java);

	tcase_add_test(key, test_empty_and_null);
	tcase_add_test(key, test_negative_hash_floor_mod);
	tcase_add_test(key, test_parallelism_one);
	tcase_add_test(key, test_invalid_arguments);
	tcase_add_test(key, test_embedded_nul);
	suite_add_tcase(s, key);

	tcase_add_test(random, test_random_keys_in_range);
	tcase_set_timeout(random, 60);
	suite_add_tcase(s, random);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(group_key_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
