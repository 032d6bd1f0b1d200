/* Placement, the engine half of a driver: where each byte of a device
 * lives on its components. Drivers only describe placement; the engine does
 * the I/O and the redundancy logic (read one healthy copy, retry another
 * on error; write every healthy copy) the same way for every driver. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define VB_MAX_COPIES 8

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

/* The parsed, fixed layout of one started device. */
typedef struct {
  guint n_components;
  guint64 component_size; /* bytes of data per component (the smallest, where sizes must match) */
  const guint64 *component_sizes; /* each component's data size (linear) */
  guint64 chunk_size;             /* raid0, raid10 */
  guint copies;                   /* raid1 (= n_components), raid10 */
  guint64 size;                   /* of the device */
} VbLayout;

G_END_DECLS
