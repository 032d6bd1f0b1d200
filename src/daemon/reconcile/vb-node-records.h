/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What udev learns of vblk's block nodes (data/udev/64-vblk.rules): one
 * small file per node under RUN_DIR/udev, imported by the rule (no D-Bus
 * call from a rule); worker thread. */
#pragma once

#include "vb-plan.h"
#include "vb-state.h"

G_BEGIN_DECLS

/* RUN_DIR/udev/bMAJOR:MINOR for each started device's node (VBLK_NODE=device,
 * VBLK_NAME, VBLK_UUID: udev makes the /dev/vblk/NAME and by-id links) and
 * for each node this vblkd (@instance) uses under one of them
 * (VBLK_NODE=internal: hidden from UDisks and systemd); files of nodes no
 * longer so go. A node whose file changed gets a change event. */
void vb_node_records_sync (const char *run_dir, const char *instance, const VbState *state,
                           GHashTable *running);

G_END_DECLS
