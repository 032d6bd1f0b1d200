/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Block events (vb-udev.c): those about the nodes vblk runs trigger an
 * observe op; the others go to hotplug. */
#pragma once

#include "vb-reconcile.h"

G_BEGIN_DECLS

void vb_udev_watch (VbDaemon *daemon);
/* After start-up: every block device there now goes through the policy. */
void vb_udev_coldplug (void);

G_END_DECLS
