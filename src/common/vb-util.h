/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by vblkd and vbmgr: device names, object paths,
 * component source syntax. Pure functions, no I/O. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define VB_NAME_MAX 64

/* [A-Za-z0-9._-]{1,64}, not "." or "..". Sets VB_ERROR_INVALID_ARGUMENT
 * naming @what (e.g. "name") on failure. */
gboolean vb_name_is_valid (const char *name, const char *what, GError **error);

/* Device name -> D-Bus object path element: alnum kept, every other byte
 * (including '_') written as _XX in lower-case hex, so it is reversible. */
char *vb_object_path_escape (const char *name);
char *vb_object_path_unescape (const char *element);

/* "/org/vblk/VBlk1/devices/<escaped>" */
char *vb_device_object_path (const char *name);
/* "/org/vblk/VBlk1/devices/<escaped>/components/<index>" */
char *vb_component_object_path (const char *name, guint index);

/* Kinds of component source, from the text a user writes. */
typedef enum {
  VB_SOURCE_PATH,   /* /dev/sdb, /srv/a.img (absolute) */
  VB_SOURCE_DEVICE, /* vblk:NAME */
  VB_SOURCE_NBD,    /* nbd://..., nbd+unix://... */
} VbSourceKind;

/* Classifies @source; for VB_SOURCE_DEVICE sets *@device_name (owned by the
 * caller). Relative paths and empty strings are refused. */
gboolean vb_source_parse (const char *source, VbSourceKind *kind, char **device_name,
                          GError **error);

/* @text as a message shows what a caller gave: cut to at most
 * VB_SHOWN_MAX bytes at a character's start, with its length, so a huge
 * value never fills a log line or an error; always UTF-8 (bytes that are
 * not become U+FFFD). */
#define VB_SHOWN_MAX 80
char *vb_shown (const char *text);

/* A random RFC 4122 v4 UUID, lower case. */
char *vb_uuid_new (void);
gboolean vb_uuid_is_valid (const char *uuid);
/* A GHashFunc for tables keyed by UUIDs (with g_str_equal): their first
 * and last eight characters, not all 36 — what runs is looked up for each
 * of thousands of devices at every op. Any string works (a short one is
 * hashed whole). */
guint vb_uuid_hash (gconstpointer key);

G_END_DECLS

G_BEGIN_DECLS
/* qsort comparator for an array of char* (compares the strings pointed to). */
int vb_compare_string_pointers (const void *a, const void *b);
G_END_DECLS
