/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The stable DEV_DIR/NAME links to block nodes (vb-devlinks.c; worker thread). */
#pragma once

#include "vb-plan.h"
#include "vb-state.h"

G_BEGIN_DECLS

void vb_devlinks_sync (const char *dev_dir, const VbState *state, GHashTable *running);

G_END_DECLS
