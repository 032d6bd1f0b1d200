/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.vblk.VBlk1.Device and .Component: their method handlers (vb-device.c). */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

void vb_device_connect_handlers (VbDaemon *daemon, VbDBusDevice *device);
void vb_component_connect_handlers (VbDaemon *daemon, VbDBusComponent *component);
/* The device and index (*@index) a component object (@inv's path) stands
 * for, or NULL with NOT_FOUND. */
const VbDeviceConfig *vb_component_of (VbDaemon *daemon, GDBusMethodInvocation *inv, guint *index,
                                       GError **error);
/* Device.WaitState (vb-device-wait.c); vb_device_waits_check answers the
 * waits whose device reached its state (after the objects are published) */
gboolean vb_device_handle_wait_state (VbDBusDevice *iface, GDBusMethodInvocation *inv,
                                      const char *state, GVariant *options, VbDaemon *daemon);
void vb_device_waits_check (VbDaemon *daemon);
/* Component.Replace (vb-device-replace.c) */
gboolean vb_component_handle_replace (VbDBusComponent *iface, GDBusMethodInvocation *inv,
                                      const char *source, GVariant *options, VbDaemon *daemon);

G_END_DECLS
