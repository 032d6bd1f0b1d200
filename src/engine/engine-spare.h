/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's spares layer (engine-spare.c): a spare taking a failed
 * slot, a re-add. Calls the jobs, metadata and component layers. */
#pragma once

#include "engine-sync.h"

/* @i failed: a spare (if any) takes its slot and is rebuilt (own thread). */
void engine_spare_take (VbEngine *e, guint i);
/* Waits for a spare's takeover under way; the engine joins it before it ends. */
void engine_spare_join (VbEngine *e);
