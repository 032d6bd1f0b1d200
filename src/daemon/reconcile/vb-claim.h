/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The claim (DESIGN.md, "A component is claimed once"): every path that
 * puts a file or block device under a device — create, add, spare,
 * reconfigure, scan/adopt, the policy engine — reaches it through the op
 * worker's check of the devices a change touches, before anything is
 * saved. Worker thread only; the facts come from vb-inspect.c. */
#pragma once

#include "vb-probe.h"

G_BEGIN_DECLS

/* Refuses any component of @config that may not be claimed:
 *  - not there (a component @previous did not have: NOT_FOUND), not a
 *    regular file or block device, or not answering (vb_inspect);
 *  - a block node vblk made (this device's own, another device's — built
 *    on as vblk:NAME instead —, one vblk uses inside a device, or another
 *    vblkd's), or a file its engine serves: BUSY;
 *  - built on the node of @config or of a device built on it (through
 *    dm, md, a partition, or a file system on it): DEPENDENCY_CYCLE;
 *  - mounted, held by the kernel (holders: dm, md) or held open
 *    exclusively — unless @holder, the running configuration of the
 *    device, has it (it holds its own): WOULD_LOSE_DATA or BUSY;
 *  - used by another device of the state, unless both are windows on
 *    disjoint ranges: BUSY. */
gboolean vb_claim_device (VbProbe *probe, const VbDeviceConfig *config,
                          const VbDeviceConfig *previous, const VbDeviceConfig *holder,
                          GError **error);

/* Refuses to take away @block_device while it is mounted or opened
 * exclusively (BUSY, naming the mount point). */
gboolean vb_claim_node_unused (VbProbe *probe, const char *name, const char *block_device,
                               GError **error);

G_END_DECLS
