/* Test-only points. With VBLK_TEST_STOP_AT=STEP in the environment, the
 * process stops itself (SIGSTOP) on reaching STEP, so a test can SIGKILL
 * it at exactly that point. With VBLK_TEST_HOLD_AT=STEP and
 * VBLK_TEST_HOLD_FILE=PATH, only the thread that reaches STEP waits, as
 * long as PATH exists, while the rest of the process goes on (a long op
 * held for as long as a test likes). Costs two getenv otherwise. */
#pragma once

void vb_test_hook (const char *step);
