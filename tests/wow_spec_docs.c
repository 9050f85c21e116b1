/* SPDX-License-Identifier: MIT */
/* wow_spec_docs.c - the spec's example documents (wow_spec_docs.h). */
#include "wow_spec_docs.h"

const char spec_command[] =
	"{\"id\":\"command-id\",\"contextName\":\"sales\",\"aggregateName\":"
	"\"Order\",\"name\":\"CreateOrder\",\"header\":{\"trace\":\"trace-1\"},"
	"\"tenantId\":\"tenant-1\",\"aggregateId\":\"order-1\",\"ownerId\":"
	"\"owner-1\",\"spaceId\":\"space-1\",\"requestId\":\"request-1\","
	"\"aggregateVersion\":3,\"isCreate\":true,\"isVoid\":false,"
	"\"allowCreate\":true,\"bodyType\":"
	"\"me.ahoo.wow.serialization.JsonSerializerCommandTest$CreateOrder\","
	"\"body\":{\"orderId\":\"order-1\",\"quantity\":2},\"createTime\":1000}";

const char spec_stream[] =
	"{\"id\":\"stream-1\",\"contextName\":\"sales\",\"aggregateName\":"
	"\"Order\",\"header\":{},\"aggregateId\":\"order-1\",\"tenantId\":"
	"\"tenant-1\",\"ownerId\":\"owner-1\",\"spaceId\":\"space-1\","
	"\"commandId\":\"command-1\",\"requestId\":\"request-1\",\"version\":5,"
	"\"body\":[{\"id\":\"event-1\",\"name\":\"OrderCreated\",\"revision\":"
	"\"1\",\"bodyType\":"
	"\"me.ahoo.wow.serialization.JsonSerializerEventTest$OrderCreated\","
	"\"body\":{\"orderId\":\"order-1\"}}],\"createTime\":2000}";

const char spec_state[] =
	"{\"id\":\"stream-1\",\"contextName\":\"sales\",\"aggregateName\":"
	"\"Order\",\"header\":{},\"aggregateId\":\"order-1\",\"tenantId\":"
	"\"tenant-1\",\"ownerId\":\"owner-1\",\"spaceId\":\"space-1\","
	"\"commandId\":\"command-1\",\"requestId\":\"request-1\",\"version\":5,"
	"\"firstOperator\":\"op-1\",\"firstEventTime\":1500,\"state\":"
	"{\"orderId\":\"order-1\",\"status\":\"CREATED\"},\"tags\":"
	"{\"region\":[\"east\"]},\"deleted\":false,"
	"\"body\":[{\"id\":\"event-1\",\"name\":\"OrderCreated\",\"revision\":"
	"\"1\",\"bodyType\":"
	"\"me.ahoo.wow.serialization.JsonSerializerEventTest$OrderCreated\","
	"\"body\":{\"orderId\":\"order-1\"}}],\"createTime\":2000}";
