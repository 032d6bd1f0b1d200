/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Online reconfiguration, the pure part: which conversions exist, and the
 * device configuration a Reconfigure asks for. No D-Bus, no I/O: the
 * daemon then checks the real components (vb-reconfig-run.c). */
#pragma once

#include <glib.h>

#include "vb-state.h"

G_BEGIN_DECLS

typedef struct {
  const char *driver;        /* the new driver; NULL or "": the same */
  GHashTable *attributes;    /* given, char* -> char* (NULL: none) */
  const char *const *add;    /* sources of new slots, appended (NULL: none) */
  const char *const *remove; /* sources of slots (or replaced ones) to drop */
} VbReconfigRequest;

/* The configuration @old becomes, with UUIDs for the new components:
 *  - file or window (offset 0) -> raid1 with added legs (metadata=none:
 *    the data stays at byte 0 of the component, which has no room for a
 *    superblock; the desired state records which legs are behind), or ->
 *    linear with appended components;
 *  - raid1 -> raid1 with legs added and/or removed (one left at least);
 *  - raid1 with one leg left -> file (metadata=none) or window (its data
 *    area: offset 1 MiB with metadata=vblk);
 *  - linear -> linear with components appended.
 * Anything that would move data (raid0, raid10, reshapes) is
 * VB_ERROR_NOT_SUPPORTED naming the reason; a request that changes
 * nothing, or names components wrongly, VB_ERROR_INVALID_ARGUMENT. */
VbDeviceConfig *vb_reconfig_plan (const VbDeviceConfig *old, const VbReconfigRequest *request,
                                  GError **error);

/* "raid1 of /a.img, /b.img" — for people (events, vbmgr show). */
char *vb_reconfig_describe (const VbDeviceConfig *d);

/* Whether @d keeps its on-component metadata (superblocks) */
gboolean vb_reconfig_has_metadata (const VbDeviceConfig *d);

G_END_DECLS
