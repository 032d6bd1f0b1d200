/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.vblk.VBlk1.Manager: Create, Scan, ... (vb-manager.c). */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

void vb_manager_export (VbDaemon *daemon);

/* CreateDevice's change, shared with Apply: @config (taken; attributes
 * resolved, UUIDs filled in where NULL) added to @candidate after the
 * checks of a new device (name, backend, md1, cycles); started with its
 * dependencies when @start. */
gboolean vb_mutate_create_device (VbState *candidate, VbDeviceConfig *config, gboolean start,
                                  VbOpIntent *intent, GError **error);

/* Manager.Apply (vb-manager-apply.c) */
gboolean vb_manager_handle_apply (VbDBusManager *iface, GDBusMethodInvocation *invocation,
                                  const char *json, GVariant *options, VbDaemon *daemon);

G_END_DECLS
