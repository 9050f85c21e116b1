# SPDX-License-Identifier: MIT
# Builds aggring's examples against the installed library, with nothing
# but pkg-config: `make install` puts this file, as Makefile, beside the
# examples' sources in PREFIX/share/doc/aggring/examples (the Debian
# package libaggring-dev: /usr/share/doc/aggring/examples).
#
#   cp -r /usr/share/doc/aggring/examples ~/aggring-examples
#   cd ~/aggring-examples && make
#
# builds basic/journal, basic/echo_server, basic/append_store and
# ledger/ledger_server; ledger/ledger_load when pkg-config finds hiredis;
# wow/wow_ledger, wow/wow_produce and wow/wow_project when it finds
# aggring-redis (libaggring-redis-dev). For a prefix pkg-config does not
# search, set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig. GNU make.

CC ?= cc
CFLAGS ?= -O2 -g -Wall -Wextra -Wno-unused-parameter
PKG_CONFIG ?= pkg-config
# The examples' own headers, shared ones in common/.
EX_CPPFLAGS = -D_GNU_SOURCE -Icommon

have = $(shell $(PKG_CONFIG) --exists $(1) && echo yes)
AGR_CFLAGS := $(shell $(PKG_CONFIG) --cflags aggring)
AGR_LIBS := $(shell $(PKG_CONFIG) --libs aggring) -pthread
ifneq ($(call have,aggring),yes)
$(error pkg-config does not find aggring: install libaggring-dev (or set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig))
endif

PROGRAMS = basic/journal basic/echo_server basic/append_store \
	ledger/ledger_server
ifeq ($(call have,hiredis),yes)
PROGRAMS += ledger/ledger_load
endif
ifeq ($(call have,aggring-redis json-c hiredis),yes)
PROGRAMS += wow/wow_ledger wow/wow_produce wow/wow_project
endif

NET = common/acceptor.c common/drain.c common/net.c common/opts.c \
	common/util.c
LOAD = ledger/ledger_load.c ledger/load_metrics.c ledger/load_options.c
# ledger_server is every ledger/ source but the load generator's.
LEDGER_SERVER = $(filter-out $(LOAD),$(wildcard ledger/*.c)) \
	$(wildcard common/*.c)
WOW_COMMON = wow/wow_common.c wow/wow_accounts.c

all: $(PROGRAMS)

basic/journal: basic/journal.c common/opts.c common/util.c
basic/echo_server: basic/echo_server.c $(NET)
basic/append_store: basic/append_store.c $(NET)
ledger/ledger_server: $(LEDGER_SERVER)
ledger/ledger_load: $(LOAD) common/net.c common/opts.c common/util.c \
	common/buf.c
ledger/ledger_load: LIBS = $(shell $(PKG_CONFIG) --libs hiredis)
ledger/ledger_load: EXTRA_CFLAGS = $(shell $(PKG_CONFIG) --cflags hiredis)

WOW_PKGS = aggring-redis json-c hiredis
wow/wow_ledger: wow/wow_ledger.c wow/wow_ledger_handler.c $(WOW_COMMON)
wow/wow_produce: wow/wow_produce.c $(WOW_COMMON)
wow/wow_project: wow/wow_project.c $(WOW_COMMON)
wow/%: LIBS = $(shell $(PKG_CONFIG) --libs $(WOW_PKGS))
wow/%: EXTRA_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(WOW_PKGS))

$(PROGRAMS):
	$(CC) $(EX_CPPFLAGS) $(CPPFLAGS) $(AGR_CFLAGS) $(EXTRA_CFLAGS) \
		$(CFLAGS) -o $@ $^ $(LDFLAGS) $(LIBS) $(AGR_LIBS)

clean:
	rm -f $(PROGRAMS) ledger/ledger_load wow/wow_ledger wow/wow_produce \
		wow/wow_project

.PHONY: all clean
