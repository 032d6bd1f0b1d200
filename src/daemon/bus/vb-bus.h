/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What talks D-Bus: the connection, the object tree, the Job objects and
 * polkit. The bus side reaches the reconciler through vb-reconcile.h; the
 * reconciler reports back through the VbPublish registered here
 * (vb_bus_publish, vb-objects.c). */
#pragma once

#include <gio/gio.h>
#include <polkit/polkit.h>

#include "vb-dbus-generated.h"
#include "vb-reconcile.h"

G_BEGIN_DECLS

typedef struct _VbJobs VbJobs; /* vb-jobs.h */

struct _VbBus {
  GDBusConnection *connection;
  guint owner_id;         /* g_bus_own_name's */
  gboolean name_owned;    /* owned on the current connection */
  gboolean ever_owned;    /* owned once already (a later one is "again") */
  guint reconnect_source; /* the bus went away: tries it again */
  GDBusObjectManagerServer *object_manager;
  VbDBusManager *manager;
  GHashTable *device_objects; /* name -> VbDBusObjectSkeleton* */
  VbJobs *jobs;               /* the Job objects (vb-jobs.c) */
  PolkitAuthority *authority;
  GDBusConnection *reads_watched; /* vb_objects_watch_reads's connection (a weak pointer) */
  guint reads_filter;
};

G_END_DECLS
