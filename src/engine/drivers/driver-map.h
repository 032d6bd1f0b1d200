/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Placement, the engine half of a driver: where each byte of a device
 * lives on its components. Drivers only describe placement; the engine does
 * the I/O and the redundancy logic (read one healthy copy, retry another
 * on error; write every healthy copy) the same way for every driver. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define VB_MAX_COPIES 8
/* The most components any driver takes; VbLayout holds one size for each. */
#define VB_MAX_COMPONENTS 64

/* One contiguous piece of a request and every copy that holds it. */
typedef struct {
  guint64 offset; /* in the device */
  guint64 length;
  guint n_copies;
  struct {
    guint component;
    guint64 offset; /* in the component's data area */
  } copies[VB_MAX_COPIES];
} VbMapping;

/* The parsed, fixed layout of one started device. Plain data, no pointers:
 * the engine copies it, and nothing has to be freed. */
typedef struct {
  guint n_components;
  guint64 component_size; /* bytes of data per component (the smallest, where sizes must match) */
  /* Every driver fills these: the bytes of each component that the layout
   * reaches; every copy's offset + length stays within them. */
  guint64 component_sizes[VB_MAX_COMPONENTS];
  guint64 chunk_size; /* raid0, raid10; 0: no chunks */
  guint copies;       /* copies of every byte: raid1 (= n_components), raid10; 1 otherwise */
  guint64 start;      /* window: where the device begins in its component */
  guint64 size;       /* of the device */
} VbLayout;

G_END_DECLS
