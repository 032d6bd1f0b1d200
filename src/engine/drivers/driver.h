/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The driver interface: what a device does with its components. Each
 * driver is one file exposing one const VbDriver; drivers.c lists them.
 * Issue 2 needs only the declarative part (attributes, component rules,
 * size) and the single-extent mapping that the kernel loop backend uses. */
#pragma once

#include <glib.h>

#include "driver-map.h"

G_BEGIN_DECLS

typedef enum {
  VB_ATTR_BOOL,   /* "true" / "false" (accepts 1/0, yes/no, on/off) */
  VB_ATTR_UINT,   /* decimal */
  VB_ATTR_SIZE,   /* bytes; K M G T suffixes (binary) accepted */
  VB_ATTR_CHOICE, /* one word of @choices */
} VbAttrType;

typedef struct {
  const char *name;
  VbAttrType type;
  const char *default_value; /* canonical text */
  gboolean online;           /* can change while the device is started */
  guint64 multiple;          /* SIZE: value must be a multiple (0: any) */
  const guint64 *allowed;    /* UINT: 0-terminated allowed values, or NULL */
  const char *description;
  const char *const *choices; /* CHOICE: NULL-terminated words */
  /* What a saved state that does not name the attribute means, when that
   * is not @default_value: states written before the attribute existed
   * (vb_driver_resolve_saved_attributes). NULL: the default. */
  const char *saved_absent;
} VbAttrSpec;

/* The attributes every redundant driver shares: on-component metadata, the
 * write-intent bitmap and the speed of resync and rebuild jobs. */
extern const char *const vb_metadata_choices[];
extern const char *const vb_bitmap_choices[];
extern const char *const vb_md_version_choices[];
#define VB_BITMAP_CHUNK_MIN (64ULL << 10)
#define VB_REDUNDANCY_ATTRIBUTES                                                                   \
  { "metadata",                                                                                    \
    VB_ATTR_CHOICE,                                                                                \
    "vblk",                                                                                        \
    FALSE,                                                                                         \
    0,                                                                                             \
    NULL,                                                                                          \
    "on-component metadata: vblk (a superblock and bitmap on every component, data from 1 MiB), " \
    "none, or md1 (an mdadm array's own 1.x superblocks, which md keeps; backend kernel)",         \
    vb_metadata_choices },                                                                         \
      { "md_version",                                                                              \
        VB_ATTR_CHOICE,                                                                            \
        "1.2",                                                                                     \
        FALSE,                                                                                     \
        0,                                                                                         \
        NULL,                                                                                      \
        "metadata=md1: where the superblock lies (1.0 at the end, 1.1 at the start, 1.2 4 KiB "    \
        "in)",                                                                                     \
        vb_md_version_choices },                                                                   \
      { "data_offset",                                                                             \
        VB_ATTR_SIZE,                                                                              \
        "0",                                                                                       \
        FALSE,                                                                                     \
        512,                                                                                       \
        NULL,                                                                                      \
        "metadata=md1: where the data starts on each component (mdadm's data offset)" },           \
      { "data_size",                                                                               \
        VB_ATTR_SIZE,                                                                              \
        "0",                                                                                       \
        FALSE,                                                                                     \
        512,                                                                                       \
        NULL,                                                                                      \
        "metadata=md1: bytes of each component the array uses (mdadm's used device size; 0: all)" }, \
      { "bitmap",                                                                                  \
        VB_ATTR_CHOICE,                                                                            \
        "internal",                                                                                \
        FALSE,                                                                                     \
        0,                                                                                         \
        NULL,                                                                                      \
        "write-intent bitmap: internal (on every component; needs metadata=vblk) or none",         \
        vb_bitmap_choices },                                                                       \
      { "bitmap_chunk",                                                                            \
        VB_ATTR_SIZE,                                                                              \
        "67108864",                                                                                \
        FALSE,                                                                                     \
        0,                                                                                         \
        NULL,                                                                                      \
        "bytes of the device per bitmap bit: a power of two from 64K" },                           \
      { "sync_speed_min",                                                                          \
        VB_ATTR_SIZE,                                                                              \
        "1048576",                                                                                 \
        TRUE,                                                                                      \
        0,                                                                                         \
        NULL,                                                                                      \
        "bytes per second a resync, rebuild or check keeps while the device is busy (0: only "     \
        "sync_speed_max limits it)" },                                                             \
  {                                                                                                \
    "sync_speed_max", VB_ATTR_SIZE, "0", TRUE, 0, NULL,                                            \
        "bytes per second a resync, rebuild or check never exceeds (0: no limit)"                  \
  }

/* The on-component metadata of a driver that keeps one copy of its data
 * (raid0, linear): superblocks by default, as md keeps them, so that a
 * stack comes back from its disks. A device saved before these drivers had
 * the attribute has its data from byte 0 of each component: metadata=none. */
extern const char *const vb_metadata_single_copy_choices[];
#define VB_METADATA_ATTRIBUTE                                                                      \
  { "metadata",                                                                                    \
    VB_ATTR_CHOICE,                                                                                \
    "vblk",                                                                                        \
    FALSE,                                                                                         \
    0,                                                                                             \
    NULL,                                                                                          \
    "on-component metadata: vblk (a superblock on every component, data from 1 MiB) or none "     \
    "(data from byte 0; no superblock, so scan cannot find the device)",                          \
    vb_metadata_single_copy_choices,                                                               \
    "none" }

/* What the daemon found out about a component before asking the driver. */
typedef enum {
  VB_COMPONENT_KIND_FILE = 1 << 0,   /* regular file */
  VB_COMPONENT_KIND_BLOCK = 1 << 1,  /* block device */
  VB_COMPONENT_KIND_DEVICE = 1 << 2, /* another vblk device (vblk:NAME) */
} VbComponentKind;

typedef struct {
  const char *source; /* as the user wrote it */
  VbComponentKind kind;
  guint64 size;     /* bytes */
  gboolean missing; /* a slot of a device with metadata whose path is gone:
                       started degraded, size that of the others */
} VbComponentInfo;

/* A contiguous byte range of one component: all that a kernel loop device
 * can show. */
typedef struct {
  guint component; /* index into the components */
  guint64 offset;
  guint64 size; /* bytes, never 0 */
  gboolean read_only;
  guint sector_size;
} VbExtent;

typedef struct {
  const char *name;
  const char *description;
  const VbAttrSpec *attributes; /* terminated by an entry with name NULL */
  guint min_components;
  guint max_components;
  guint component_kinds; /* VbComponentKind mask */
  /* Keeps more than one copy of the data: a component may be missing,
   * fail, be rebuilt or re-added, and spares make sense. */
  gboolean redundant;
  /* Cross-checks once every attribute is canonical and present. NULL: none. */
  gboolean (*validate) (GHashTable *attributes, const VbComponentInfo *components,
                        guint n_components, GError **error);
  guint64 (*size) (GHashTable *attributes, const VbComponentInfo *components, guint n_components);
  /* NULL when the driver needs the engine (more than one extent). */
  void (*extent) (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                  VbExtent *extent);
  /* The engine's view: the fixed layout of a started device ... */
  void (*layout) (GHashTable *attributes, const VbComponentInfo *components, guint n_components,
                  VbLayout *layout);
  /* ... and the placement of the bytes from @offset on: fills @out with
   * the first piece (out->offset = @offset, 0 < out->length <= @length,
   * ending at the next chunk or component boundary) and every copy of it.
   * Copies' offsets are relative to each component's data area. */
  void (*map) (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out);
} VbDriver;

const VbDriver *vb_driver_lookup (const char *name);
/* NULL-terminated array of every driver, in a stable order. */
const VbDriver *const *vb_drivers (void);
/* "file, window, linear, ..." */
char *vb_drivers_known_names (void);

const VbAttrSpec *vb_driver_attr_spec (const VbDriver *driver, const char *name);
/* "read_only, sector_size" */
char *vb_driver_attr_names (const VbDriver *driver);

/* Parses @value as @spec says; returns the canonical text or NULL with
 * VB_ERROR_INVALID_ARGUMENT "attribute 'NAME': ..." set. */
char *vb_attr_canonicalize (const VbAttrSpec *spec, const char *value, GError **error);

/* Checks the names and values of @given (char* -> char*) and returns the
 * full attribute set: @base (may be NULL) overlaid with the canonical
 * @given, defaults for everything still missing. */
GHashTable *vb_driver_resolve_attributes (const VbDriver *driver, GHashTable *base,
                                          GHashTable *given, GError **error);
/* The same for the attributes of a device read back from a saved state:
 * an attribute it does not name means its saved_absent value (what the
 * device had before the attribute existed), not the default of a new
 * device. */
GHashTable *vb_driver_resolve_saved_attributes (const VbDriver *driver, GHashTable *saved,
                                                GError **error);

/* Component count and kinds, then driver->validate. */
gboolean vb_driver_validate (const VbDriver *driver, GHashTable *attributes,
                             const VbComponentInfo *components, guint n_components, GError **error);

gboolean vb_attr_get_bool (GHashTable *attributes, const char *name);

/* Helpers for drivers. The smallest component's size, and its index in
 * *@which (the first when several are equal). */
guint64 vb_components_smallest (const VbComponentInfo *components, guint n_components,
                                guint *which);
/* chunk_size must be a power of two from VB_CHUNK_MIN to VB_CHUNK_MAX (so
 * that any logical block size up to 4K divides a chunk), and the smallest
 * component must hold one chunk. */
#define VB_CHUNK_MIN (4ULL << 10)
#define VB_CHUNK_MAX (64ULL << 20)
gboolean vb_check_chunks (GHashTable *attributes, const VbComponentInfo *components,
                          guint n_components, GError **error);
guint64 vb_attr_get_u64 (GHashTable *attributes, const char *name);
/* One component holding the whole device at the same offsets: the layout
 * and the placement of drivers that pass one component through. */
void vb_layout_single (guint64 size, VbLayout *layout);
void vb_map_identity (const VbLayout *layout, guint64 offset, guint64 length, VbMapping *out);

/* Checks the redundancy attributes (bitmap needs metadata, bitmap_chunk a
 * power of two); TRUE for a driver without them. */
gboolean vb_check_redundancy (GHashTable *attributes, GError **error);
/* Superblocks on the components: metadata=vblk or md1. */
gboolean vb_driver_has_metadata (GHashTable *attributes);
/* Spares: a redundant driver with superblocks (a spare carries one, so
 * that it is found with its device and never taken by another). */
gboolean vb_driver_takes_spares (const VbDriver *driver, GHashTable *attributes);
/* Where data starts on each component: 0, VB_DATA_OFFSET (1 MiB) with
 * metadata=vblk (superblock at 4 KiB, bitmap from 8 KiB), or attribute
 * data_offset with metadata=md1. */
#define VB_DATA_OFFSET (1ULL << 20)
guint64 vb_driver_data_offset (GHashTable *attributes);

G_END_DECLS
