/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The polkit check, first thing in every changing method (vb-auth.c). */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

typedef void (*VbAuthorizedFunc) (VbDaemon *daemon, GDBusMethodInvocation *invocation,
                                  gpointer user_data);
void vb_auth_check (VbDaemon *daemon, GDBusMethodInvocation *invocation, const char *action_id,
                    const char *device_name, VbAuthorizedFunc authorized, gpointer user_data,
                    GDestroyNotify destroy);

/* The uid of @invocation's caller, from the bus; @known FALSE when the bus
 * could not say. */
typedef void (*VbCallerUidFunc) (gboolean known, guint32 uid, gpointer user_data);
void vb_auth_caller_uid (GDBusMethodInvocation *invocation, VbCallerUidFunc done,
                         gpointer user_data);

G_END_DECLS
