/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Device methods' changes to the desired state (vb-device-mutate.c),
 * each a VbMutateFunc: @user_data is the method's VbRequest. */
#pragma once

#include "vb-reconcile.h"

G_BEGIN_DECLS

gboolean vb_mutate_start (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                          VbOpIntent *intent, GError **error);
gboolean vb_mutate_stop (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                         VbOpIntent *intent, GError **error);
gboolean vb_mutate_delete (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                           VbOpIntent *intent, GError **error);
gboolean vb_mutate_set_attributes (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                                   VbOpIntent *intent, GError **error);
gboolean vb_mutate_add_component (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                                  VbOpIntent *intent, GError **error);
gboolean vb_mutate_export (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                           VbOpIntent *intent, GError **error);
gboolean vb_mutate_reconfigure (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                                VbOpIntent *intent, GError **error);
/* A backend asked for @d (running as @r, or NULL): one built in, and for a
 * started device the one it runs on (else NOT_SUPPORTED). */
gboolean vb_backend_option_check (const VbDeviceConfig *d, const VbRunning *r, const char *backend,
                                  GError **error);
/* Component methods (@user_data their VbRequest, its name the device's) */
gboolean vb_mutate_fault (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                          VbOpIntent *intent, GError **error);
gboolean vb_mutate_remove (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                           VbOpIntent *intent, GError **error);

G_END_DECLS
