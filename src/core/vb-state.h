/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The desired state: what the administrator asked for, as loaded from and
 * saved to state.json (schema in DESIGN.md). Pure data and JSON; no D-Bus,
 * no knowledge of drivers (the daemon validates semantics separately).
 * The model is in vb-state.c, the reader in vb-state-parse.c, the writer
 * and the file in vb-state-file.c. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define VB_STATE_VERSION 1
#define VB_STATE_FILE "state.json"

typedef struct {
  char *source; /* path, vblk:NAME, or NBD URI */
  char *role;   /* slot number as decimal text, "spare", or "faulty" (replaced by a spare) */
  char *uuid;   /* component UUID */
  /* a slot of a redundant device without on-component metadata whose copy
   * is behind (a leg being rebuilt, or one that failed): JSON "in_sync":
   * false. With metadata=vblk the superblocks say it instead. */
  gboolean behind;
  /* such a slot failed (or was failed): it stays faulty, neither read nor
   * written, until it is re-added (JSON "faulty": true) */
  gboolean faulty;
} VbComponentConfig;

typedef struct {
  char *name;
  char *uuid;
  char *driver;
  char *backend;          /* "auto", "loop", ... */
  GHashTable *attributes; /* char* -> char*, owned */
  GPtrArray *components;  /* VbComponentConfig*, in role order */
  GPtrArray *exports;     /* char*, e.g. "nbd unix:/run/x.sock" */
  gboolean autostart;     /* start at boot (when the run dir is new) */
  gboolean started;       /* the administrator wants it running now */
  gint refs;              /* vb_state_share: states holding it (atomic) */
  guint frozen;           /* VBLK_TEST_FROZEN: its digest when first shared */
} VbDeviceConfig;

typedef struct _VbStateIndex VbStateIndex;

typedef struct {
  GPtrArray *devices; /* VbDeviceConfig*, in creation order */
  /* private: vb_state_index_of's index of names, built at its first use
   * and shared by vb_state_share and vb_state_copy */
  VbStateIndex *index;
} VbState;

VbComponentConfig *vb_component_config_new (const char *source, const char *role, const char *uuid);
VbComponentConfig *vb_component_config_copy (const VbComponentConfig *c);
/* Whether @c holds a slot (its role is a number), not a spare or a
 * replaced faulty one. Slots come first in a device's components. */
gboolean vb_component_config_is_slot (const VbComponentConfig *c);
void vb_component_config_free (VbComponentConfig *c);

/* New device config: empty attributes/components/exports, autostart TRUE,
 * started FALSE. */
VbDeviceConfig *vb_device_config_new (const char *name, const char *uuid, const char *driver,
                                      const char *backend);
VbDeviceConfig *vb_device_config_copy (const VbDeviceConfig *d);
/* One reference more: for a state that only reads it (vb_state_share). */
VbDeviceConfig *vb_device_config_ref (VbDeviceConfig *d);
/* Drops a reference (vb_state_share); the last frees. */
void vb_device_config_free (VbDeviceConfig *d);
/* Two attribute tables (char* -> char*) hold the same pairs. */
gboolean vb_attributes_equal (GHashTable *a, GHashTable *b);
/* Field-by-field equality (attributes compared as maps). */
gboolean vb_device_config_equal (const VbDeviceConfig *a, const VbDeviceConfig *b);

VbState *vb_state_new (void);
VbState *vb_state_copy (const VbState *state);
/* A state holding the very device configs of @state (a reference each):
 * O(N) pointers, not N deep copies. A config held by two states is
 * never changed in place: what changes a state's device gets it through
 * vb_state_lookup_mut or vb_state_device_mut, which copy a shared one
 * first (VBLK_TEST_FROZEN=1 checks this at every release). */
VbState *vb_state_share (const VbState *state);
void vb_state_free (VbState *state);
const VbDeviceConfig *vb_state_lookup (const VbState *state, const char *name);
/* The config of device @name to change: one no other state holds (a
 * config @state shares, vb_state_share, is first copied in its place:
 * copy on write). NULL when there is none. */
VbDeviceConfig *vb_state_lookup_mut (VbState *state, const char *name);
/* Likewise, the config at @index. */
VbDeviceConfig *vb_state_device_mut (VbState *state, guint index);
/* Index of the device named @name, or -1: O(1) on a state of thousands
 * (an index of its names, safe to build from several threads at once). */
gint vb_state_index_of (const VbState *state, const char *name);
/* Call after changing @state->devices other than by appending at the end
 * or putting a config in the place of one of the same name (removing,
 * inserting, moving, renaming): the index is built again at next use.
 * VBLK_TEST_FROZEN=1 checks every index_of against a scan (g_critical). */
void vb_state_reindex (VbState *state);
/* Whether VBLK_TEST_FROZEN=1 asks for the checks against a scan (here and
 * of what other modules derive from states). */
gboolean vb_state_test_checks (void);

/* Strict parse of the JSON schema. Errors are VB_ERROR_INVALID_ARGUMENT and
 * start with @origin (a file name or "desired state"), then the place:
 * "ORIGIN:LINE:COL: ..." for syntax errors, "ORIGIN: devices[2].driver:
 * expected a string" for schema errors. Checks: version == 1, known keys
 * only, types, names valid (vb_name_is_valid), UUIDs valid, no duplicate
 * device names or UUIDs, no duplicate component sources in one device.
 * Missing optional keys take defaults (backend "auto", attributes {},
 * components [], exports [], autostart true, started false). */
VbState *vb_state_from_json (const char *text, gssize length, const char *origin, GError **error);
/* The same reader for a spec (Manager.Apply, vbmgr apply; its JSON Schema
 * is data/schema/vblk-spec.schema.json): a device's "uuid" is optional
 * (NULL) and "started" defaults to true; a component may be written as
 * its source alone, its "role" (slots numbered in order, slots before
 * spares) and "uuid" optional; attribute values may be numbers or
 * booleans; "in_sync" and "faulty", which vblkd records, are not part of
 * a spec. */
VbState *vb_spec_from_json (const char *text, gssize length, const char *origin, GError **error);
/* Pretty-printed JSON, keys in a stable order, ends with a newline. */
char *vb_state_to_json (const VbState *state);
/* @state as a spec (vbmgr dump): the same, without "in_sync" and "faulty". */
char *vb_spec_to_json (const VbState *state);

/* Loads @path. A missing file is an empty state (not an error); an
 * unreadable or corrupt file is an error naming the path and the place. */
VbState *vb_state_load (const char *path, GError **error);
/* Atomic and durable: temp file, fsync, rename, fsync of the directory. */
gboolean vb_state_save (const VbState *state, const char *path, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbState, vb_state_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbDeviceConfig, vb_device_config_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbComponentConfig, vb_component_config_free)

/* The components that hold slots. */
guint vb_device_config_n_slots (const VbDeviceConfig *d);

G_END_DECLS
