/* SPDX-License-Identifier: MIT */
/*
 * aggring/group_key.h - the Java-compatible group key.
 *
 * A dispatcher maps each message to one of `parallelism` groups by its
 * aggregate id. The mapping is the one the JVM reference uses,
 *
 *	floorMod(aggregateId.hashCode(), parallelism)
 *
 * so a C process and a JVM process put the same ids in the same groups.
 * Java hashes a String over its UTF-16 code units; aggring ids are UTF-8
 * bytes, so they are decoded to UTF-16 first, exactly as
 * `new String(bytes, StandardCharsets.UTF_8)` decodes them.
 *
 * UTF-8 decoding rule (checked against OpenJDK 17, whose String decoder
 * has been the same since JDK 9):
 *
 *  - A well-formed sequence gives its code point; one above U+FFFF gives
 *    two code units, its high and low surrogate.
 *
 *  - Everything else gives U+FFFD, one per maximal subpart, as in the
 *    Unicode "U+FFFD substitution of maximal subparts" practice: at a byte
 *    that cannot start a sequence (80..BF, C0, C1, F5..FF) one U+FFFD for
 *    that byte alone; at a lead byte, one U+FFFD for the lead byte and
 *    the continuation bytes after it that can still be part of a
 *    well-formed sequence, after which decoding resumes at the byte that
 *    broke the sequence (or stops at the end of the input). The allowed
 *    second bytes are the usual ones, which rule out overlong forms and
 *    code points above U+10FFFF: E0 needs A0..BF, F0 needs 90..BF, F4
 *    needs 80..8F, every other lead byte 80..BF. Examples:
 *	"\xff"             -> U+FFFD
 *	"a\xc3"            -> 'a' U+FFFD
 *	"\xe2\x82"         -> U+FFFD             (truncated at the end)
 *	"\xe2\x82" "A"     -> U+FFFD 'A'
 *	"\xc0\xaf"         -> U+FFFD U+FFFD      (overlong: C0 never leads)
 *	"\xe0\x80\x80"     -> U+FFFD U+FFFD U+FFFD
 *	"\xf4\x90\x80\x80" -> U+FFFD x 4         (above U+10FFFF)
 *
 *  - One exception, Java's own: an encoded surrogate, ED followed by
 *    A0..BF, is treated as a valid prefix. The complete three bytes
 *    ED A0..BF 80..BF give ONE U+FFFD (Unicode practice would give three),
 *    and ED A0..BF cut short gives one U+FFFD for those two bytes:
 *	"\xed\xa0\x80"     -> U+FFFD
 *	"\xed\xa0" "A"     -> U+FFFD 'A'
 *
 * The functions here allocate nothing, take no lock and may be called
 * from any thread.
 */
#ifndef AGGRING_GROUP_KEY_H
#define AGGRING_GROUP_KEY_H

#include <aggring/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Returns Java's String.hashCode() of the string whose UTF-8 bytes are
 * the `len` bytes at `utf8`: h = 31 * h + c over its UTF-16 code units,
 * wrapping at 32 bits, decoded by the rule at the top of this header.
 * The bytes need not be NUL-terminated and may contain NULs (U+0000).
 *
 * `utf8` may be NULL when `len` is 0: the hash of "" is 0. A NULL `utf8`
 * with a non-zero `len` is a caller bug; it is read as "" rather than
 * dereferenced.
 *
 * Never fails.
 */
AGR_API int32_t agr_java_string_hash(const char *utf8, size_t len);

/*
 * Returns the group of the NUL-terminated `aggregate_id` among
 * `parallelism` groups: floorMod(agr_java_string_hash(id, strlen(id)),
 * parallelism), a value in [0, parallelism). floorMod, unlike C's %,
 * keeps a negative hash in range: hash -7 with parallelism 4 gives 1.
 *
 * Errors:
 *	-EINVAL	`aggregate_id` is NULL or `parallelism` <= 0.
 */
AGR_API int agr_group_key(const char *aggregate_id, int parallelism);

/*
 * agr_group_key() for an id given as `len` bytes at `aggregate_id`,
 * which need not be NUL-terminated and may contain NULs.
 *
 * Errors:
 *	-EINVAL	`aggregate_id` is NULL (even with `len` 0) or
 *		`parallelism` <= 0.
 */
AGR_API int agr_group_key_n(const char *aggregate_id, size_t len,
			    int parallelism);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_GROUP_KEY_H */
