/* Test-only crash points. With VBLK_TEST_STOP_AT=STEP in the environment,
 * the process stops itself (SIGSTOP) on reaching STEP, so a test can
 * SIGKILL it at exactly that point. Costs one getenv otherwise. */
#pragma once

void vb_test_hook (const char *step);
