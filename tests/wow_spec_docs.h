/* SPDX-License-Identifier: MIT */
/*
 * wow_spec_docs.h - the Wow documents of the spec's examples (section 3),
 * byte for byte as Wow's serializers write them, for the suites that
 * encode, decode or send them (check_wow_codec, check_wow_bus).
 */
#ifndef TESTS_WOW_SPEC_DOCS_H
#define TESTS_WOW_SPEC_DOCS_H

/* The command example, in CommandJsonSerializer's order. */
extern const char spec_command[];
/* The domain event stream example. */
extern const char spec_stream[];
/* The stream example as a state event: StateEventJsonSerializer order. */
extern const char spec_state[];

#endif /* TESTS_WOW_SPEC_DOCS_H */
