/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test-only points. With VBLK_TEST_STOP_AT=STEP in the environment, the
 * process stops itself (SIGSTOP) on reaching STEP, so a test can SIGKILL
 * it at exactly that point. With VBLK_TEST_HOLD_AT=STEP and
 * VBLK_TEST_HOLD_FILE=PATH, only the thread that reaches STEP waits, as
 * long as PATH exists, while the rest of the process goes on (a long op
 * held for as long as a test likes). Costs two getenv otherwise. */
#pragma once

void vb_test_hook (const char *step);

/* The same hold for the main thread, without blocking it: TRUE while
 * @step is held (the caller looks again a little later). */
int vb_test_hook_holding (const char *step);
