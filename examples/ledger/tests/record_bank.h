/* SPDX-License-Identifier: MIT */
/*
 * record_bank.h - check_ledger_record's bank cases (record_bank.c).
 */
#ifndef LEDGER_TESTS_RECORD_BANK_H
#define LEDGER_TESTS_RECORD_BANK_H

#include <check.h>

/* The accounts on a real dispatcher and journal, as one test case. */
TCase *bank_tcase(void);

#endif /* LEDGER_TESTS_RECORD_BANK_H */
