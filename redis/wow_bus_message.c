/* SPDX-License-Identifier: MIT */
/*
 * wow_bus_message.c - what a handler reads of a message the bus
 * delivered: its entry id, its decoded value and its topic
 * (aggring/wow_bus.h). The message is the first member of its entry.
 */
#include "wow_bus_state.h"

const char *agr_wow_message_entry_id(const agr_message *msg)
{
	return msg ? ((const struct wow_entry *)(const void *)msg)->id : NULL;
}

void *agr_wow_message_value(const agr_message *msg)
{
	return msg ? ((const struct wow_entry *)(const void *)msg)->d.value :
		     NULL;
}

const char *agr_wow_message_topic(const agr_message *msg)
{
	const struct wow_entry *en =
		(const struct wow_entry *)(const void *)msg;

	return msg ? en->bus->topics[en->topic] : NULL;
}
