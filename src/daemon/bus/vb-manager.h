/* org.vblk.VBlk1.Manager: Create, Scan, ... (vb-manager.c). */
#pragma once

#include "vb-bus.h"

G_BEGIN_DECLS

void vb_manager_export (VbDaemon *daemon);

G_END_DECLS
