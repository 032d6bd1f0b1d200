/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The D-Bus objects, rebuilt from desired + observed after every op
 * (vb-objects.c); the reconciler reaches them through vb_bus_publish. */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

extern const VbPublish vb_bus_publish;

void vb_objects_sync (VbDaemon *daemon);
/* Watches @connection for reads of every object: vblkd gives their
 * memory back once each is answered (vb_daemon_give_back_memory_soon);
 * NULL: no longer. */
void vb_objects_watch_reads (VbDaemon *daemon, GDBusConnection *connection);
/* Only the devices named in @names (a set; one no longer desired leaves
 * the bus), which must hold every dependent of each. */
void vb_objects_sync_devices (VbDaemon *daemon, GHashTable *names);
void vb_objects_emit_event (VbDaemon *daemon, const char *kind, const char *device,
                            GVariant *details);
/* A component of an engine device failed (any thread). */
void vb_daemon_component_failed (const char *uuid, guint component, int error, gpointer user_data);
/* State names for D-Bus. */
const char *vb_daemon_device_state (VbDaemon *daemon, const VbDeviceConfig *config);
/* Component @index of @d as D-Bus shows its State: "in-sync", "rebuilding",
 * "faulty", "missing", "spare". */
const char *vb_component_state_of (VbDaemon *daemon, const VbDeviceConfig *d, guint index);

G_END_DECLS
