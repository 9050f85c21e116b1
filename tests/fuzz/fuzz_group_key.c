/* SPDX-License-Identifier: MIT */
/*
 * fuzz_group_key.c - libFuzzer target for the group key over arbitrary
 * bytes: no crash, no undefined behaviour, keys in [0, parallelism),
 * and the hash of a string equals the hash of its UTF-8 decoded then
 * re-read prefix-by-prefix (h(ab) = h(a) * 31^len16(b) + h(b) cannot be
 * checked across an invalid boundary, so only ranges are asserted).
 *
 * Built and run by .ci/run with clang -fsanitize=fuzzer,address,undefined
 * for a bounded time.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/group_key.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int parallelisms[] = { 1, 2, 3, 7, 64, 128, 1000003,
					    2147483647 };
	const char *id = (const char *)data;
	int32_t h = agr_java_string_hash(id, size);
	size_t i;

	for (i = 0; i < sizeof(parallelisms) / sizeof(parallelisms[0]); i++) {
		int p = parallelisms[i];
		int k = agr_group_key_n(id, size, p);
		int64_t expect = ((int64_t)h % p + p) % p;

		if (k < 0 || k >= p || k != expect)
			abort();
	}
	if (agr_group_key_n(id, size, 0) != -EINVAL ||
	    agr_group_key_n(id, size, -5) != -EINVAL)
		abort();
	return 0;
}
