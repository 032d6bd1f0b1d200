/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr: declarations shared by the command files (cmd-*.c) and the common
 * helpers in vbmgr.c — connecting to vblkd, calling it, reporting errors
 * with the exit codes of the contract — and in listing.c (tables, JSON
 * lists). */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "vb-dbus-generated.h"

G_BEGIN_DECLS

/* Exit codes (DESIGN.md, vbmgr). */
#define VB_EXIT_OK 0
#define VB_EXIT_FAILED 1 /* refused or failed operation */
#define VB_EXIT_USAGE 2  /* bad usage */
/* vbmgr status: the worst health of the devices it looked at */
#define VB_EXIT_STATUS_DEGRADED 3
#define VB_EXIT_STATUS_FAILED 4

/* One command: run() gets argv[0] == the command name and returns an exit
 * code. */
typedef struct {
  const char *name;
  const char *parameters; /* e.g. "NAME [--json]", for the usage text */
  const char *summary;
  int (*run) (int argc, char **argv);
} VbMgrCommand;

/* cmd-list.c */
int vb_cmd_list (int argc, char **argv);
int vb_cmd_show (int argc, char **argv);
/* cmd-device.c */
int vb_cmd_create (int argc, char **argv);
int vb_cmd_set (int argc, char **argv);
int vb_cmd_add (int argc, char **argv);
int vb_cmd_start (int argc, char **argv);
int vb_cmd_stop (int argc, char **argv);
int vb_cmd_delete (int argc, char **argv);
int vb_cmd_reconfigure (int argc, char **argv);
/* cmd-graph.c */
int vb_cmd_graph (int argc, char **argv);
int vb_cmd_fail (int argc, char **argv);
int vb_cmd_remove (int argc, char **argv);
int vb_cmd_check (int argc, char **argv);
int vb_cmd_export (int argc, char **argv);
/* cmd-jobs.c */
int vb_cmd_jobs (int argc, char **argv);
int vb_cmd_wait (int argc, char **argv);
/* cmd-cancel.c */
int vb_cmd_cancel (int argc, char **argv);
/* cmd-status.c */
int vb_cmd_status (int argc, char **argv);
int vb_cmd_drivers (int argc, char **argv);
int vb_cmd_backends (int argc, char **argv);
/* cmd-apply.c */
int vb_cmd_apply (int argc, char **argv);
int vb_cmd_dump (int argc, char **argv);
/* cmd-examine.c (no daemon) */
int vb_cmd_examine (int argc, char **argv);
/* cmd-scan.c */
int vb_cmd_scan (int argc, char **argv);
/* cmd-wipe.c */
int vb_cmd_wipe (int argc, char **argv);
/* cmd-monitor.c */
int vb_cmd_monitor (int argc, char **argv);
/* cmd-policy.c */
int vb_cmd_policy (int argc, char **argv);

/* Parses the options of @command with GOption (so "vbmgr COMMAND --help"
 * works); on return argv[0] is the command and argv[1..] the positional
 * arguments. Prints a usage error and returns FALSE on bad options. */
gboolean vb_mgr_parse_options (const char *command, const char *parameters, const char *summary,
                               const GOptionEntry *entries, int *argc, char ***argv);

/* Prints "vbmgr: usage: COMMAND: MESSAGE" and a hint; returns
 * VB_EXIT_USAGE. */
int vb_mgr_usage_error (const char *command, const char *format, ...) G_GNUC_PRINTF (2, 3);

/* Prints "vbmgr: COMMAND[ TARGET]: ShortName: message" (or "vbmgr: cannot
 * reach vblkd: ..." when the daemon is not there); returns VB_EXIT_FAILED.
 * Strips the remote error prefix of @error in place. */
int vb_mgr_fail (const char *command, const char *target, GError *error);

/* Connects to vblkd on the system bus; prints why not and returns NULL when
 * it cannot be reached. */
GDBusObjectManager *vb_mgr_connect (void);

/* The Device interface of the device named @name, or NULL after printing
 * "vbmgr: COMMAND NAME: NotFound: no device named 'NAME'". */
VbDBusDevice *vb_mgr_lookup_device (GDBusObjectManager *manager, const char *command,
                                    const char *name);
/* The Manager interface, or NULL after printing why (as vb_mgr_fail). */
VbDBusManager *vb_mgr_get_manager (GDBusObjectManager *manager, const char *command,
                                   const char *target);
/* The Component interface at @path, or NULL. */
/* @manager NULL: the component's object fetched alone (vbmgr show) */
VbDBusComponent *vb_mgr_lookup_component (GDBusObjectManager *manager, const char *path);
/* The reply's first value of @method, a call that changes nothing (no
 * authorization, no interaction); NULL once the failure is reported
 * for @command. @parameters, floating, is consumed. */
GVariant *vb_mgr_read (const char *command, const char *path, const char *interface,
                       const char *method, GVariant *parameters, const GVariantType *reply_type);
/* Every device, sorted by name (VbDBusDevice*, owned). */
GPtrArray *vb_mgr_list_devices (GDBusObjectManager *manager);
/* Name of the device at @path (its Name property, or the unescaped last
 * path element when the object is gone). */
/* @manager NULL: from the path alone */
char *vb_mgr_device_name_from_path (GDBusObjectManager *manager, const char *path);
/* The device named @name as an object of its own (a proxy: one GetAll,
 * not GetManagedObjects); NULL after saying why on stderr. */
VbDBusDevice *vb_mgr_get_device (const char *command, const char *name);

/* Calls @method on @proxy without a time limit (the daemon answers once the
 * work is done), allowing interactive polkit authorization when stdin is a
 * terminal. Consumes a floating @parameters. */
GVariant *vb_mgr_call (gpointer proxy, const char *method, GVariant *parameters, GError **error);

/* "K=V" strings -> a{ss}. Returns NULL after printing a usage error for
 * @command when one is malformed or a key is repeated. */
GVariant *vb_mgr_parse_assignments (const char *command, const char *const *assignments);

/* A component source as vblkd wants it: relative paths made absolute
 * against the current directory; vblk:NAME and NBD URIs unchanged. */
char *vb_mgr_absolute_source (const char *source);

/* Pretty-printed JSON on stdout, with a final newline. */
void vb_mgr_print_json (JsonNode *root);
/* Prints @items as a JSON array, each built by @to_json. */
typedef void (*VbMgrToJsonFunc) (JsonBuilder *builder, GDBusObjectManager *manager, gpointer item);
void vb_mgr_print_json_list (GDBusObjectManager *manager, GPtrArray *items,
                             VbMgrToJsonFunc to_json);

/* listing.c: one listing command (list, jobs): "--json" prints every item
 * by @to_json as a JSON array, otherwise a table: the @header (N_ ()
 * strings, NULL-terminated) and one @row per item (as many cells,
 * NULL-terminated, owned by the table). */
typedef struct {
  const char *command;
  const char *summary; /* N_ () */
  const char *const *header;
  GPtrArray *(*collect) (GDBusObjectManager *manager); /* the items, sorted */
  char **(*row) (GDBusObjectManager *manager, gpointer item);
  VbMgrToJsonFunc to_json;
} VbMgrListing;
int vb_mgr_run_listing (const VbMgrListing *listing, int argc, char **argv);

/* One component of a device as shown: index from its object path
 * ".../components/N"; the device's components in its order (owned views),
 * those removed while they were read left out. */
typedef struct {
  guint64 index;
  char *source;
  char *role;
  char *state;
  guint64 errors;
} VbMgrComponentView;
void vb_mgr_component_view_free (VbMgrComponentView *view);
GPtrArray *vb_mgr_collect_components (GDBusObjectManager *manager, VbDBusDevice *device);

/* Prints @rows (each a char*[@columns]) left-aligned in columns, each line
 * after @indent; the last column is not padded, and no line ends in a blank. */
void vb_mgr_print_table (GPtrArray *rows, guint columns, const char *indent);
/* A table row: copies of the strings up to NULL, NULL-terminated. */
char **vb_mgr_row (const char *first, ...) G_GNUC_NULL_TERMINATED;
/* @s, or "" for NULL (JSON); @s, or "-" for NULL or "" (tables). */
const char *vb_mgr_str (const char *s);
const char *vb_mgr_or_dash (const char *s);

G_END_DECLS
