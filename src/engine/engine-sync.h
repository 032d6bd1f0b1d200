/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's jobs layer (engine-sync.c): resync, rebuild, check and
 * repair jobs, and the bitmap's sweeper. Calls the metadata and component
 * layers only. */
#pragma once

#include "engine-meta.h"

/* Starts a job: "resync", "rebuild", "check" or "repair"; returns its id,
 * or 0 when one runs. */
guint64 engine_sync_start (VbEngine *e, const char *operation, gboolean repair);
/* The bitmap's sweeper, and when @need the job that makes the copies
 * equal: a rebuild where a slot is behind, else a resync. */
void engine_sync_start_needed (VbEngine *e, gboolean need);
/* Stops the running job (if any) and waits for its thread. */
void engine_sync_stop (VbEngine *e);
/* Stops the bitmap's sweeper (a quiesce, a stop). */
void engine_sweeper_stop (VbEngine *e);
