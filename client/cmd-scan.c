/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr scan: asks vblkd to find devices from the superblocks on their
 * components (Manager.Scan) and, with --adopt, to take back the ones its
 * desired state lost. Prints one block per device found, or JSON. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>

/* "0", "1", ... or "spare" */
static char *
role_text (gint32 role)
{
  return role < 0 ? g_strdup ("spare") : g_strdup_printf ("%d", role);
}

static JsonNode *
strv_json (const char *const *strv)
{
  JsonArray *array = json_array_new ();

  for (guint i = 0; strv && strv[i]; i++)
    json_array_add_string_element (array, strv[i]);
  return json_node_init_array (json_node_alloc (), array);
}

/* One a{sv} of the "found" list as a JSON object; object paths become
 * device names. */
static JsonObject *
entry_json (GDBusObjectManager *manager, GVariant *entry)
{
  JsonObject *o = json_object_new ();
  g_autoptr (GVariant) components = NULL;
  g_autofree const char **problems = NULL;
  const char *s;
  const char *uuid = NULL;
  guint64 t;
  guint32 u;
  gboolean b;

  if (g_variant_lookup (entry, "uuid", "&s", &uuid))
    json_object_set_string_member (o, "uuid", uuid);
  if (g_variant_lookup (entry, "name", "&s", &s))
    json_object_set_string_member (o, "name", s);
  if (g_variant_lookup (entry, "path", "&s", &s))
    json_object_set_string_member (o, "path", s);
  if (g_variant_lookup (entry, "driver", "&s", &s))
    json_object_set_string_member (o, "driver", s);
  if (g_variant_lookup (entry, "events", "t", &t))
    json_object_set_int_member (o, "events", (gint64) t);
  if (g_variant_lookup (entry, "slots", "u", &u))
    json_object_set_int_member (o, "slots", u);
  if (g_variant_lookup (entry, "known", "b", &b))
    json_object_set_boolean_member (o, "known", b);
  if (g_variant_lookup (entry, "adopted", "b", &b))
    json_object_set_boolean_member (o, "adopted", b);
  if (g_variant_lookup (entry, "device", "&o", &s))
    {
      g_autofree char *name = vb_mgr_device_name_from_path (manager, s);
      json_object_set_string_member (o, "device", name);
    }
  components = g_variant_lookup_value (entry, "components", G_VARIANT_TYPE ("aa{sv}"));
  if (components)
    {
      JsonArray *array = json_array_new ();
      GVariantIter iter;
      GVariant *c;

      g_variant_iter_init (&iter, components);
      while ((c = g_variant_iter_next_value (&iter)) != NULL)
        {
          JsonObject *co = json_object_new ();
          gint32 role = 0;
          g_autofree char *role_s = NULL;

          if (g_variant_lookup (c, "path", "&s", &s))
            json_object_set_string_member (co, "path", s);
          if (g_variant_lookup (c, "uuid", "&s", &s))
            json_object_set_string_member (co, "uuid", s);
          g_variant_lookup (c, "role", "i", &role);
          role_s = role_text (role);
          json_object_set_string_member (co, "role", role_s);
          if (g_variant_lookup (c, "events", "t", &t))
            json_object_set_int_member (co, "events", (gint64) t);
          if (g_variant_lookup (c, "stale", "b", &b))
            json_object_set_boolean_member (co, "stale", b);
          /* what a start makes of it: current, resync, rebuild, faulty... */
          if (g_variant_lookup (c, "start", "&s", &s))
            json_object_set_string_member (co, "start", s);
          json_array_add_object_element (array, co);
          g_variant_unref (c);
        }
      json_object_set_array_member (o, "components", array);
    }
  if (!g_variant_lookup (entry, "problems", "^a&s", &problems))
    problems = NULL;
  json_object_set_member (o, "problems", strv_json (problems));
  if (g_variant_lookup (entry, "note", "&s", &s))
    json_object_set_string_member (o, "note", s);
  return o;
}

static void
print_text (JsonArray *found)
{
  for (guint i = 0; i < json_array_get_length (found); i++)
    {
      JsonObject *o = json_array_get_object_element (found, i);
      JsonArray *problems = json_object_get_array_member (o, "problems");

      if (!json_object_has_member (o, "uuid"))
        g_print ("%s\n", json_object_get_string_member (o, "path"));
      else
        {
          JsonArray *components = json_object_get_array_member (o, "components");
          const char *state = json_object_get_boolean_member (o, "adopted") ? _ ("adopted")
                              : json_object_get_boolean_member (o, "known") ? _ ("known")
                                                                            : _ ("unknown");

          g_print ("%s  %s  %s  %s %" G_GINT64_FORMAT "  %s",
                   json_object_get_string_member (o, "name"),
                   json_object_get_string_member (o, "uuid"),
                   json_object_get_string_member (o, "driver"), _ ("events"),
                   json_object_get_int_member (o, "events"), state);
          if (json_object_has_member (o, "device")
              && g_strcmp0 (json_object_get_string_member (o, "device"),
                            json_object_get_string_member (o, "name"))
                     != 0)
            g_print (" (%s)", json_object_get_string_member (o, "device"));
          g_print ("\n");
          for (guint j = 0; j < json_array_get_length (components); j++)
            {
              JsonObject *c = json_array_get_object_element (components, j);

              gboolean stale = json_object_get_boolean_member (c, "stale");
              const char *start = json_object_get_string_member_with_default (c, "start", "");

              g_print ("    %-6s %s  %s %" G_GINT64_FORMAT "%s%s%s%s\n",
                       json_object_get_string_member (c, "role"),
                       json_object_get_string_member (c, "path"), _ ("events"),
                       json_object_get_int_member (c, "events"), stale ? _ ("  stale") : "",
                       stale && *start ? " (" : "", stale ? start : "", stale && *start ? ")" : "");
            }
        }
      for (guint j = 0; j < json_array_get_length (problems); j++)
        g_print ("    %s %s\n", _ ("problem:"), json_array_get_string_element (problems, j));
      if (json_object_has_member (o, "note"))
        g_print ("    %s %s\n", _ ("note:"), json_object_get_string_member (o, "note"));
    }
}

int
vb_cmd_scan (int argc, char **argv)
{
  gboolean adopt = FALSE, start = FALSE, json = FALSE;
  const GOptionEntry entries[]
      = { { "adopt", 0, 0, G_OPTION_ARG_NONE, &adopt,
            N_ ("Add the devices found that the desired state does not have"), NULL },
          { "start", 0, 0, G_OPTION_ARG_NONE, &start,
            N_ ("Start the devices adopted (with --adopt)"), NULL },
          { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusManager) iface = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GVariant) found = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonArray) array = json_array_new ();
  GVariantIter iter;
  GVariant *entry;

  if (!vb_mgr_parse_options ("scan", "[PATH…]",
                             _ ("Find devices from the superblocks on their components (by "
                                "default on every block device), and with --adopt add the ones "
                                "vblkd does not know. The block nodes of the devices found that "
                                "run (with --start, those adopted too) are read in turn, so "
                                "that a stack comes back level by level."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (start && !adopt)
    return vb_mgr_usage_error ("scan", _ ("--start needs --adopt"));
  if (argc > 1)
    {
      g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);

      for (int i = 1; i < argc; i++)
        {
          if (*argv[i] == '\0')
            return vb_mgr_usage_error ("scan", _ ("a path is empty"));
          g_ptr_array_add (paths, g_canonicalize_filename (argv[i], NULL));
        }
      g_ptr_array_add (paths, NULL);
      g_variant_builder_add (&options, "{sv}", "paths",
                             g_variant_new_strv ((const char *const *) paths->pdata, -1));
    }
  if (adopt)
    g_variant_builder_add (&options, "{sv}", "adopt", g_variant_new_boolean (TRUE));
  if (start)
    g_variant_builder_add (&options, "{sv}", "start", g_variant_new_boolean (TRUE));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  iface = vb_mgr_get_manager (manager, "scan", NULL);
  if (iface == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (iface, "Scan", g_variant_new ("(@a{sv})", g_variant_builder_end (&options)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail ("scan", NULL, error);

  /* adopted devices: their objects appear with the reply's signals */
  found = g_variant_get_child_value (reply, 1);
  g_variant_iter_init (&iter, found);
  while ((entry = g_variant_iter_next_value (&iter)) != NULL)
    {
      json_array_add_object_element (array, entry_json (manager, entry));
      g_variant_unref (entry);
    }
  if (json)
    {
      g_autoptr (JsonNode) root = json_node_init_array (json_node_alloc (), array);
      vb_mgr_print_json (root);
    }
  else
    print_text (array);
  return VB_EXIT_OK;
}
