/* org.vblk.VBlk1.Device and .Component: their method handlers (vb-device.c). */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

void vb_device_connect_handlers (VbDaemon *daemon, VbDBusDevice *device);
void vb_component_connect_handlers (VbDaemon *daemon, VbDBusComponent *component);

G_END_DECLS
