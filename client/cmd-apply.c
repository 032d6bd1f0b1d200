/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr apply and dump: a spec (the JSON of state.json, as
 * data/schema/vblk-spec.schema.json documents it) given to Manager.Apply,
 * its plan printed as a table or JSON, with a progress bar while the
 * apply's job runs; and the desired state printed as a spec (Dump). */
#include "config.h"

#include "vbmgr.h"

#include <gio/gunixinputstream.h>
#include <glib/gi18n.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The plan's table: one line per step, with its status once run. */
static void
print_plan (const char *json, gboolean dry_run)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonArray *steps;

  if (!json_parser_load_from_data (parser, json, -1, NULL))
    {
      g_print ("%s\n", json);
      return;
    }
  steps = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)),
                                        "steps");
  if (json_array_get_length (steps) == 0)
    {
      g_print (_ ("nothing to do: the desired state is the spec\n"));
      return;
    }
  g_print ("%3s  %-11s  %-16s  %-8s  %s\n", "#", _ ("ACTION"), _ ("DEVICE"), _ ("STATUS"),
           _ ("WHY"));
  for (guint i = 0; i < json_array_get_length (steps); i++)
    {
      JsonObject *s = json_array_get_object_element (steps, i);
      const char *status = json_object_get_string_member_with_default (s, "status", "planned");
      const char *arg = json_object_get_string_member_with_default (
          s, "source", json_object_get_string_member_with_default (s, "listen", NULL));

      g_print ("%3u  %-11s  %-16s  %-8s  %s%s%s%s\n", i + 1,
               json_object_get_string_member (s, "action"),
               json_object_get_string_member (s, "device"), status, arg ? arg : "", arg ? ": " : "",
               json_object_get_string_member (s, "reason"),
               json_object_get_boolean_member (s, "loses_data") ? _ (" (loses data)") : "");
    }
  if (dry_run)
    g_print (_ ("%u steps (dry run: nothing done)\n"), json_array_get_length (steps));
}

/* The progress of the apply's job, on a terminal's stderr. */
typedef struct {
  GMainLoop *loop;
  GVariant *reply;
  GError *error;
  gboolean bar;
} Call;

static void
show_progress (VbDBusJob *job)
{
  guint64 done = vb_dbus_job_get_bytes_done (job), total = vb_dbus_job_get_bytes (job);
  guint width = 30, filled = total ? (guint) (done * width / total) : 0;
  g_autofree char *bar = g_strnfill (filled, '#');
  g_autofree char *rest = g_strnfill (width - filled, '.');

  g_printerr ("\r[%s%s] %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT " %s", bar, rest, done, total,
              _ ("steps"));
}

static void
on_job_changed (GDBusProxy *proxy, GVariant *changed, GStrv invalidated, gpointer data)
{
  show_progress (VB_DBUS_JOB (proxy));
}

static void
on_object_added (GDBusObjectManager *manager, GDBusObject *object, gpointer data)
{
  g_autoptr (VbDBusJob) job = vb_dbus_object_get_job (VB_DBUS_OBJECT (object));

  if (job && g_strcmp0 (vb_dbus_job_get_operation (job), "apply") == 0)
    {
      g_signal_connect (job, "g-properties-changed", G_CALLBACK (on_job_changed), data);
      show_progress (job);
    }
}

static void
apply_returned (GObject *source, GAsyncResult *result, gpointer data)
{
  Call *call = data;

  call->reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), result, &call->error);
  g_main_loop_quit (call->loop);
}

static gboolean
read_spec (const char *file, char **text, GError **error)
{
  if (strcmp (file, "-") != 0)
    return g_file_get_contents (file, text, NULL, error);
  {
    g_autoptr (GInputStream) in = g_unix_input_stream_new (STDIN_FILENO, FALSE);
    g_autoptr (GOutputStream) out = g_memory_output_stream_new_resizable ();
    if (g_output_stream_splice (out, in, G_OUTPUT_STREAM_SPLICE_NONE, NULL, error) < 0
        || !g_output_stream_write_all (out, "", 1, NULL, NULL, error) /* NUL-terminated */
        || !g_output_stream_close (out, NULL, error))
      return FALSE;
    *text = g_memory_output_stream_steal_data (G_MEMORY_OUTPUT_STREAM (out));
    return TRUE;
  }
}

int
vb_cmd_apply (int argc, char **argv)
{
  gboolean dry_run = FALSE, prune = FALSE, json = FALSE;
  g_auto (GStrv) confirm = NULL;
  const GOptionEntry entries[]
      = { { "dry-run", 0, 0, G_OPTION_ARG_NONE, &dry_run,
            N_ ("Only print the plan (and check it); change nothing"), NULL },
          { "prune", 0, 0, G_OPTION_ARG_NONE, &prune,
            N_ ("Delete the devices the spec does not have"), NULL },
          { "confirm", 0, 0, G_OPTION_ARG_STRING_ARRAY, &confirm,
            N_ ("Allow this step that loses data (its id, e.g. set:NAME)"), N_ ("ID") },
          { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print the plan as JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusManager) iface = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GMainLoop) loop = NULL;
  g_autofree char *text = NULL;
  const char *plan;
  Call call = { 0 };

  if (!vb_mgr_parse_options ("apply", "FILE|- [--dry-run] [--prune] [--confirm ID]... [--json]",
                             _ ("Make the desired state what the spec in FILE (- : standard "
                                "input) says: print the plan, then carry it out, all or "
                                "nothing."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc != 2)
    return vb_mgr_usage_error ("apply", _ ("expected one file (or - for standard input)"));
  if (!read_spec (argv[1], &text, &error))
    return vb_mgr_fail ("apply", argv[1], error);
  if (dry_run)
    g_variant_builder_add (&options, "{sv}", "dry-run", g_variant_new_boolean (TRUE));
  if (prune)
    g_variant_builder_add (&options, "{sv}", "prune", g_variant_new_boolean (TRUE));
  if (confirm)
    g_variant_builder_add (&options, "{sv}", "confirm",
                           g_variant_new_strv ((const char *const *) confirm, -1));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  iface = vb_mgr_get_manager (manager, "apply", NULL);
  if (iface == NULL)
    return VB_EXIT_FAILED;
  call.bar = !json && !dry_run && isatty (STDERR_FILENO);
  if (call.bar)
    g_signal_connect (manager, "object-added", G_CALLBACK (on_object_added), &call);
  loop = g_main_loop_new (NULL, FALSE);
  call.loop = loop;
  g_dbus_proxy_call (G_DBUS_PROXY (iface), "Apply",
                     g_variant_new ("(s@a{sv})", text, g_variant_builder_end (&options)),
                     isatty (STDIN_FILENO) ? G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION
                                           : G_DBUS_CALL_FLAGS_NONE,
                     G_MAXINT, NULL, apply_returned, &call);
  g_main_loop_run (loop);
  if (call.bar)
    g_printerr ("\r\033[K");
  if (call.reply == NULL)
    {
      int status = vb_mgr_fail ("apply", argv[1], call.error);
      g_clear_error (&call.error);
      return status;
    }
  g_variant_get (call.reply, "(&s)", &plan);
  if (json)
    g_print ("%s\n", plan);
  else
    print_plan (plan, dry_run);
  g_variant_unref (call.reply);
  return VB_EXIT_OK;
}

int
vb_cmd_dump (int argc, char **argv)
{
  const GOptionEntry entries[] = { G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusManager) iface = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  const char *spec;

  if (!vb_mgr_parse_options ("dump", "",
                             _ ("Print the desired state as a spec, which vbmgr apply takes "
                                "(vbmgr dump | vbmgr apply - has nothing to do)."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc != 1)
    return vb_mgr_usage_error ("dump", _ ("takes no arguments"));
  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  iface = vb_mgr_get_manager (manager, "dump", NULL);
  if (iface == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (iface, "Dump", g_variant_new ("(@a{sv})", g_variant_new ("a{sv}", NULL)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail ("dump", NULL, error);
  g_variant_get (reply, "(&s)", &spec);
  g_print ("%s", spec);
  return VB_EXIT_OK;
}
