/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr monitor: streams vblkd's Manager.Event signals, one line each
 * (human, or one JSON object with --json), flushed as they come, until
 * SIGINT or SIGTERM. A signal needs no authorization. */
#include "config.h"

#include "vbmgr.h"

#include <glib-unix.h>
#include <glib/gi18n.h>
#include <stdio.h>
#include <string.h>

#include "vb-util.h"

typedef struct {
  GMainLoop *loop;
  gboolean json;
  const char *program;  /* --program: run for each event, or NULL */
  gboolean was_running; /* vblkd owned its name when last looked at */
  gboolean first;       /* no name watch report yet */
  gboolean lost_bus;
} VbMgrMonitor;

/* The device an event is about: its name from the object path, or NULL
 * (path "/"). The object may be gone already (device-disappeared). */
static char *
vb_mgr_event_device (const char *path)
{
  const char *prefix = VB_OBJECT_ROOT "/devices/";

  if (!g_str_has_prefix (path, prefix) || strchr (path + strlen (prefix), '/') != NULL)
    return NULL;
  return vb_object_path_unescape (path + strlen (prefix));
}

/* Keys of an a{sv}, sorted, so that lines are stable. */
static GPtrArray *
vb_mgr_sorted_keys (GVariant *details)
{
  GPtrArray *keys = g_ptr_array_new_with_free_func (g_free);
  GVariantIter iter;
  const char *key;

  g_variant_iter_init (&iter, details);
  while (g_variant_iter_next (&iter, "{&sv}", &key, NULL))
    g_ptr_array_add (keys, g_strdup (key));
  g_ptr_array_sort (keys, vb_compare_string_pointers);
  return keys;
}

static gboolean
vb_mgr_needs_quotes (const char *s)
{
  if (*s == '\0')
    return TRUE;
  for (const char *p = s; *p; p++)
    if ((guchar) *p <= ' ' || *p == 0x7f || *p == '"' || *p == '\'' || *p == '\\')
      return TRUE;
  return FALSE;
}

/* key=value: strings as they are, in double quotes (with \" and \\
 * escaped, control characters as \n or \ooo) when they hold a blank, a
 * control character or a quote, or are empty; other values in GVariant text form. */
static void
vb_mgr_append_detail (GString *line, const char *key, GVariant *value)
{
  const char *s;

  g_string_append_printf (line, " %s=", key);
  if (!g_variant_is_of_type (value, G_VARIANT_TYPE_STRING)
      && !g_variant_is_of_type (value, G_VARIANT_TYPE_OBJECT_PATH))
    {
      g_autofree char *text = g_variant_print (value, FALSE);

      g_string_append (line, text);
      return;
    }
  s = g_variant_get_string (value, NULL);
  if (!vb_mgr_needs_quotes (s))
    {
      g_string_append (line, s);
      return;
    }
  g_string_append_c (line, '"');
  for (const char *p = s; *p; p++)
    {
      if (*p == '"' || *p == '\\')
        g_string_append_printf (line, "\\%c", *p);
      else if (*p == '\n')
        g_string_append (line, "\\n");
      else if ((guchar) *p < 0x20 || *p == 0x7f)
        g_string_append_printf (line, "\\%03o", (guchar) *p);
      else
        g_string_append_c (line, *p);
    }
  g_string_append_c (line, '"');
}

static char *
vb_mgr_event_text (GDateTime *now, const char *kind, const char *device, GVariant *details)
{
  g_autofree char *time = g_date_time_format (now, "%FT%T");
  g_autoptr (GPtrArray) keys = vb_mgr_sorted_keys (details);
  GString *line = g_string_new (NULL);

  g_string_append_printf (line, "%s %s %s", time, kind, device ? device : "-");
  for (guint i = 0; i < keys->len; i++)
    {
      g_autoptr (GVariant) value = g_variant_lookup_value (details, keys->pdata[i], NULL);

      vb_mgr_append_detail (line, keys->pdata[i], value);
    }
  return g_string_free (line, FALSE);
}

static char *
vb_mgr_event_json (GDateTime *now, const char *kind, const char *device, GVariant *details)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) generator = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (GPtrArray) keys = vb_mgr_sorted_keys (details);
  g_autofree char *time = g_date_time_format_iso8601 (now);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "time");
  json_builder_add_string_value (b, time);
  json_builder_set_member_name (b, "kind");
  json_builder_add_string_value (b, kind);
  json_builder_set_member_name (b, "device");
  if (device)
    json_builder_add_string_value (b, device);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "details");
  json_builder_begin_object (b);
  for (guint i = 0; i < keys->len; i++)
    {
      g_autoptr (GVariant) value = g_variant_lookup_value (details, keys->pdata[i], NULL);

      json_builder_set_member_name (b, keys->pdata[i]);
      json_builder_add_value (b, json_gvariant_serialize (value));
    }
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (generator, root); /* one line: not pretty */
  return json_generator_to_data (generator, NULL);
}

/* VBLK_ + the key in capitals, other characters as '_' */
static char *
vb_mgr_env_name (const char *key)
{
  GString *name = g_string_new ("VBLK_");

  for (const char *p = key; *p; p++)
    g_string_append_c (name, g_ascii_isalnum (*p) ? g_ascii_toupper (*p) : '_');
  return g_string_free (name, FALSE);
}

/* --program: "sh -c PROGRAM vblk-event KIND DEVICE [SOURCE]" (the
 * arguments of mdadm --monitor --program: the event, the device, the
 * component), the event's fields in the environment (VBLK_EVENT,
 * VBLK_DEVICE, VBLK_OBJECT, VBLK_TIME, VBLK_LINE, and VBLK_KEY for each
 * detail), waited for before the next event is handled, so the program
 * sees the events in their order. */
static void
vb_mgr_run_program (const char *program, GDateTime *now, const char *kind, const char *object,
                    const char *device, GVariant *details, const char *line)
{
  g_auto (GStrv) env = g_get_environ ();
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *time = g_date_time_format_iso8601 (now);
  g_autofree char *source = NULL;
  GVariantIter iter;
  const char *key;
  GVariant *value;
  int status = 0;

  /* (no VBLK_* of vbmgr's own environment passes for a field) */
  for (guint i = 0; env[i] != NULL;)
    if (g_str_has_prefix (env[i], "VBLK_"))
      {
        g_autofree char *name = g_strndup (env[i], strcspn (env[i], "="));
        env = g_environ_unsetenv (env, name);
      }
    else
      i++;
  g_variant_iter_init (&iter, details);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      g_autofree char *name = vb_mgr_env_name (key);
      g_autofree char *text = g_variant_is_of_type (value, G_VARIANT_TYPE_STRING)
                                  ? g_variant_dup_string (value, NULL)
                                  : g_variant_print (value, FALSE);
      if (strcmp (key, "source") == 0)
        source = g_strdup (text);
      env = g_environ_setenv (env, name, text, TRUE);
      g_variant_unref (value);
    }
  /* the event's own fields last: a detail of the same name does not hide them */
  env = g_environ_setenv (env, "VBLK_EVENT", kind, TRUE);
  env = g_environ_setenv (env, "VBLK_DEVICE", device ? device : "", TRUE);
  env = g_environ_setenv (env, "VBLK_OBJECT", object, TRUE);
  env = g_environ_setenv (env, "VBLK_TIME", time, TRUE);
  env = g_environ_setenv (env, "VBLK_LINE", line, TRUE);
  g_ptr_array_add (args, (gpointer) "/bin/sh");
  g_ptr_array_add (args, (gpointer) "-c");
  g_ptr_array_add (args, (gpointer) program);
  g_ptr_array_add (args, (gpointer) "vblk-event");
  g_ptr_array_add (args, (gpointer) kind);
  g_ptr_array_add (args, (gpointer) (device ? device : ""));
  if (source != NULL)
    g_ptr_array_add (args, source);
  g_ptr_array_add (args, NULL);
  if (!g_spawn_sync (NULL, (char **) args->pdata, env, G_SPAWN_CHILD_INHERITS_STDIN, NULL, NULL,
                     NULL, NULL, &status, &error))
    g_printerr (_ ("vbmgr: monitor: cannot run the program for %s: %s\n"), kind, error->message);
  else if (!g_spawn_check_wait_status (status, &error))
    g_printerr (_ ("vbmgr: monitor: the program for %s: %s\n"), kind, error->message);
}

static void
vb_mgr_on_event (GDBusConnection *connection, const char *sender, const char *path,
                 const char *interface, const char *signal, GVariant *parameters,
                 gpointer user_data)
{
  VbMgrMonitor *m = user_data;
  g_autoptr (GVariant) details = NULL;
  g_autoptr (GDateTime) now = g_date_time_new_now_local ();
  g_autofree char *device = NULL;
  g_autofree char *line = NULL;
  const char *kind, *object;

  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(soa{sv})")))
    return;
  g_variant_get (parameters, "(&s&o@a{sv})", &kind, &object, &details);
  device = vb_mgr_event_device (object);
  line = m->json ? vb_mgr_event_json (now, kind, device, details)
                 : vb_mgr_event_text (now, kind, device, details);
  g_print ("%s\n", line);
  fflush (stdout);
  if (m->program != NULL)
    vb_mgr_run_program (m->program, now, kind, object, device, details, line);
}

static void
vb_mgr_on_name_appeared (GDBusConnection *connection, const char *name, const char *owner,
                         gpointer user_data)
{
  VbMgrMonitor *m = user_data;

  if (!m->first && !m->was_running)
    g_printerr (_ ("vbmgr: monitor: vblkd is back\n"));
  m->first = FALSE;
  m->was_running = TRUE;
}

static void
vb_mgr_on_name_vanished (GDBusConnection *connection, const char *name, gpointer user_data)
{
  VbMgrMonitor *m = user_data;

  if (connection == NULL)
    {
      g_printerr (_ ("vbmgr: monitor: lost the connection to the system bus\n"));
      m->lost_bus = TRUE;
      g_main_loop_quit (m->loop);
      return;
    }
  if (m->first || m->was_running)
    g_printerr (_ ("vbmgr: monitor: vblkd is not running; waiting for it\n"));
  m->first = FALSE;
  m->was_running = FALSE;
}

static gboolean
vb_mgr_on_quit (gpointer user_data)
{
  VbMgrMonitor *m = user_data;

  g_main_loop_quit (m->loop);
  return G_SOURCE_REMOVE;
}

int
vb_cmd_monitor (int argc, char **argv)
{
  gboolean json = FALSE;
  g_autofree char *program = NULL;
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print one JSON object per line"), NULL },
          { "program", 0, 0, G_OPTION_ARG_STRING, &program,
            N_ ("Run CMD (with /bin/sh) for each event: arguments KIND DEVICE [SOURCE], the "
                "event's fields in VBLK_EVENT, VBLK_DEVICE, VBLK_OBJECT, VBLK_TIME, VBLK_LINE and "
                "VBLK_KEY for each detail"),
            N_ ("CMD") },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusConnection) connection = NULL;
  g_autoptr (GVariant) pong = NULL;
  g_autoptr (GError) error = NULL;
  VbMgrMonitor m = { .first = TRUE };
  guint subscription, watch;

  if (!vb_mgr_parse_options ("monitor", "[--json] [--program CMD]",
                             _ ("Print the events of vblkd as they happen, one line each: "
                                "\"TIME KIND DEVICE KEY=VALUE…\" (DEVICE is \"-\" when the event "
                                "is about no device), or with --json one object per line: "
                                "{\"time\", \"kind\", \"device\", \"details\"}. Runs until "
                                "interrupted (exit status 0). vblkd is not started for it: while "
                                "vblkd is not running, or after it went away, vbmgr monitor "
                                "waits for it and says so on standard error."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc > 1)
    return vb_mgr_usage_error ("monitor", _ ("unexpected argument '%s'"), argv[1]);

  connection = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error);
  if (connection == NULL)
    return vb_mgr_fail ("monitor", NULL, error);
  m.json = json;
  m.program = program;
  m.loop = g_main_loop_new (NULL, FALSE);
  /* The bus matches the sender by whoever owns the name at the time, so
   * events of a restarted vblkd arrive too. */
  subscription = g_dbus_connection_signal_subscribe (
      connection, VB_BUS_NAME, "org.vblk.VBlk1.Manager", "Event", VB_OBJECT_ROOT "/Manager", NULL,
      G_DBUS_SIGNAL_FLAGS_NONE, vb_mgr_on_event, &m, NULL);
  watch
      = g_bus_watch_name_on_connection (connection, VB_BUS_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE,
                                        vb_mgr_on_name_appeared, vb_mgr_on_name_vanished, &m, NULL);
  /* The bus handles messages in order: once this answers, the match rule
   * is in place and no event from now on is missed. Say so (scripts wait
   * for it before they act). */
  pong = g_dbus_connection_call_sync (connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                      "org.freedesktop.DBus", "GetId", NULL, NULL,
                                      G_DBUS_CALL_FLAGS_NONE, -1, NULL, &error);
  if (pong == NULL)
    return vb_mgr_fail ("monitor", NULL, error);
  g_printerr (_ ("vbmgr: monitor: listening for the events of vblkd\n"));
  g_unix_signal_add (SIGINT, vb_mgr_on_quit, &m);
  g_unix_signal_add (SIGTERM, vb_mgr_on_quit, &m);
  g_main_loop_run (m.loop);

  g_bus_unwatch_name (watch);
  g_dbus_connection_signal_unsubscribe (connection, subscription);
  g_main_loop_unref (m.loop);
  return m.lost_bus ? VB_EXIT_FAILED : VB_EXIT_OK;
}
