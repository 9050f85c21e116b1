/* SPDX-License-Identifier: MIT */
/*
 * wow_scripts.c - Wow's two event store scripts, byte for byte as
 * wow-redis ships them (src/main/resources/, c6a3ab8), so that EVALSHA
 * finds a script a JVM service loaded, and the other way round.
 *
 * Regenerate both the text and the SHA-1 together; check_wow_event_store
 * compares the SHA-1 with what SCRIPT LOAD answers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <aggring/wow_event_store.h>

/* event_stream_append.lua */
const char agr__wow_append_lua[] =
	"local eventStreamKey = KEYS[1];\n"
	"local aggregateIdIndexKey = KEYS[2];\n"
	"local requestIdxKey = KEYS[3];\n"
	"\n"
	"local requestId = ARGV[1];\n"
	"local version = tonumber(ARGV[2]);\n"
	"local value = ARGV[3];\n"
	"local aggregateIdIndexMember = ARGV[4];\n"
	"local aggregateIdIndexMemberPrefix = ARGV[5];\n"
	"local aggregateIdIndexMemberUpperBound = ARGV[6];\n"
	"\n"
	"local count = redis.call(\"ZCARD\", eventStreamKey)\n"
	"if count ~= (version - 1) then\n"
	"    return \"EventVersionConflict\";\n"
	"end\n"
	"\n"
	"if version == 1 then\n"
	"    local existingAggregateIds = redis.call(\n"
	"        \"ZRANGEBYLEX\",\n"
	"        aggregateIdIndexKey,\n"
	"        \"[\" .. aggregateIdIndexMemberPrefix,\n"
	"        \"(\" .. aggregateIdIndexMemberUpperBound,\n"
	"        \"LIMIT\",\n"
	"        0,\n"
	"        1\n"
	"    );\n"
	"    if #existingAggregateIds > 0 then\n"
	"        return \"DuplicateAggregateId\";\n"
	"    end\n"
	"end\n"
	"\n"
	"local added = redis.call(\"SADD\", requestIdxKey, requestId)\n"
	"if added == 0 then\n"
	"    return \"DuplicateRequestId\";\n"
	"end\n"
	"\n"
	"redis.call(\"ZADD\", eventStreamKey, version, value);\n"
	"if version == 1 then\n"
	"    redis.call(\"ZADD\", aggregateIdIndexKey, 0, aggregateIdIndexMember);\n"
	"end\n"
	"return \"Ok\";\n";
const char agr__wow_append_sha1[] = "5c0053be2bb93f9a071d8f90686a8dce76789de5";

/* snapshot_save.lua */
const char agr__wow_snapshot_lua[] =
	"local snapshotKey = KEYS[1];\n"
	"local snapshotVersion = tonumber(ARGV[1]);\n"
	"local snapshot = ARGV[2];\n"
	"\n"
	"local storedSnapshot = redis.call(\"GET\", snapshotKey);\n"
	"if storedSnapshot then\n"
	"    local storedVersion = tonumber(cjson.decode(storedSnapshot)[\"version\"]);\n"
	"    if storedVersion == nil then\n"
	"        error(\"Stored Wow snapshot has no numeric version.\");\n"
	"    end\n"
	"    if storedVersion > snapshotVersion then\n"
	"        return \"Ignored\";\n"
	"    end\n"
	"end\n"
	"\n"
	"redis.call(\"SET\", snapshotKey, snapshot);\n"
	"return \"Ok\";\n";
const char agr__wow_snapshot_sha1[] = "dfef088884d9cf1ebb26d32480caa133aa00b4de";

AGR_API const char *agr_wow_append_script(void)
{
	return agr__wow_append_lua;
}

AGR_API const char *agr_wow_snapshot_script(void)
{
	return agr__wow_snapshot_lua;
}
