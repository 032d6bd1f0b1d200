/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr policy list|test|reload: the policy rules of vblkd (what it does
 * unattended when a block device appears), listed, tried on a block device
 * or on given properties without acting (Policy.Evaluate), and reloaded. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>
#include <string.h>

#include "vb-error.h"
#include "vb-size.h"

#define POLICY_PATH VB_OBJECT_ROOT "/Policy"

/* The Policy interface, or NULL after printing why. */
static VbDBusPolicy *
vb_mgr_get_policy (GDBusObjectManager *manager, const char *command)
{
  g_autoptr (GDBusObject) object = g_dbus_object_manager_get_object (manager, POLICY_PATH);
  VbDBusPolicy *iface = NULL;

  if (object != NULL)
    iface = vb_dbus_object_get_policy (VB_DBUS_OBJECT (object));
  if (iface == NULL)
    {
      g_autoptr (GError) error
          = g_error_new (VB_ERROR, VB_ERROR_FAILED, _ ("vblkd exports no %s object"), POLICY_PATH);
      vb_mgr_fail (command, NULL, error);
    }
  return iface;
}

/* vbmgr policy list */

static int
vb_mgr_policy_list (int argc, char **argv)
{
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusPolicy) policy = NULL;
  const char *const *rules;
  const char *dir;

  if (!vb_mgr_parse_options ("policy list", "",
                             _ ("List the policy rules in force, in the order they are tried "
                                "(the first that matches a block device decides), and the "
                                "directory they are read from."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc > 1)
    return vb_mgr_usage_error ("policy list", _ ("unexpected argument '%s'"), argv[1]);

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  policy = vb_mgr_get_policy (manager, "policy list");
  if (policy == NULL)
    return VB_EXIT_FAILED;
  rules = vb_dbus_policy_get_rules (policy);
  dir = vb_dbus_policy_get_directory (policy);

  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      g_autoptr (JsonNode) root = NULL;

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "directory");
      json_builder_add_string_value (b, dir ? dir : "");
      json_builder_set_member_name (b, "rules");
      json_builder_begin_array (b);
      for (guint i = 0; rules && rules[i]; i++)
        json_builder_add_string_value (b, rules[i]);
      json_builder_end_array (b);
      json_builder_end_object (b);
      root = json_builder_get_root (b);
      vb_mgr_print_json (root);
      return VB_EXIT_OK;
    }
  g_print ("%s %s\n", _ ("Directory:"), dir ? dir : "");
  if (rules == NULL || rules[0] == NULL)
    g_print ("%s\n", _ ("No rules: vblkd does nothing unattended."));
  for (guint i = 0; rules && rules[i]; i++)
    g_print ("%2u. %s\n", i + 1, rules[i]);
  return VB_EXIT_OK;
}

/* vbmgr policy test */

static const char *
vb_mgr_json_string (JsonObject *o, const char *member)
{
  JsonNode *node = json_object_get_member (o, member);

  return node != NULL && JSON_NODE_HOLDS_VALUE (node) ? json_node_get_string (node) : NULL;
}

static void
vb_mgr_print_decision (JsonObject *o)
{
  const char *rule = vb_mgr_json_string (o, "rule");
  JsonObject *input = json_object_get_object_member (o, "input");
  JsonNode *devices = json_object_get_member (o, "devices");
  gint64 after = json_object_get_int_member (o, "start_degraded_after_ms");
  const char *s;

  if (rule == NULL)
    g_print ("%s %s\n", _ ("Rule:"), _ ("none matches (vblkd does nothing)"));
  else
    g_print ("%s %s (%s:%" G_GINT64_FORMAT ")\n", _ ("Rule:"), rule, vb_mgr_json_string (o, "file"),
             json_object_get_int_member (o, "line"));
  g_print ("%s %s\n", _ ("Action:"), vb_mgr_json_string (o, "action"));
  if (devices != NULL && JSON_NODE_HOLDS_ARRAY (devices))
    {
      JsonArray *array = json_node_get_array (devices);
      g_autoptr (GString) list = g_string_new (NULL);

      for (guint i = 0; i < json_array_get_length (array); i++)
        g_string_append_printf (list, "%s%s", i ? ", " : "",
                                json_array_get_string_element (array, i));
      g_print ("%s %s\n", _ ("Devices:"), list->str);
    }
  if ((s = vb_mgr_json_string (o, "domain")) != NULL)
    g_print ("%s %s\n", _ ("Domain:"), s);
  if (after > 0)
    g_print ("%s %" G_GINT64_FORMAT " ms\n", _ ("Start degraded after:"), after);
  g_print ("%s %s\n", _ ("Why:"), vb_mgr_json_string (o, "why"));
  if (input == NULL)
    return;
  if ((s = vb_mgr_json_string (input, "devnode")) != NULL)
    g_print ("%s %s\n", _ ("Block device:"), s);
  {
    g_autofree char *size
        = g_format_size_full ((guint64) json_object_get_int_member (input, "size"),
                              G_FORMAT_SIZE_IEC_UNITS | G_FORMAT_SIZE_LONG_FORMAT);
    g_print ("%s %s\n", _ ("Size:"), size);
  }
  g_print ("%s %s\n", _ ("Metadata:"), vb_mgr_json_string (input, "metadata"));
  if ((s = vb_mgr_json_string (input, "device_name")) != NULL)
    g_print ("%s %s\n", _ ("Device name:"), s);
  if ((s = vb_mgr_json_string (input, "device_uuid")) != NULL)
    g_print ("%s %s\n", _ ("Device UUID:"), s);
  if ((s = vb_mgr_json_string (input, "problem")) != NULL)
    g_print ("%s %s\n", _ ("Problem:"), s);
}

/* Policy.Evaluate on @properties and @options, printed as text or JSON;
 * @devnode (or NULL) names the block device in messages. */
static int
vb_mgr_policy_evaluate (const char *devnode, GVariant *properties, GVariantBuilder *options,
                        gboolean json)
{
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusPolicy) policy = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  const char *decision;

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  policy = vb_mgr_get_policy (manager, "policy test");
  if (policy == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (
      policy, "Evaluate",
      g_variant_new ("(@a{ss}@a{sv})", properties, g_variant_builder_end (options)), &error);
  if (reply == NULL)
    return vb_mgr_fail ("policy test", devnode, error);
  g_variant_get (reply, "(&s)", &decision);
  if (!json_parser_load_from_data (parser, decision, -1, &error)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_autoptr (GError) bad
          = g_error_new (VB_ERROR, VB_ERROR_FAILED, _ ("vblkd's decision is not a JSON object: %s"),
                         error ? error->message : decision);
      return vb_mgr_fail ("policy test", devnode, bad);
    }
  if (json)
    vb_mgr_print_json (json_parser_get_root (parser));
  else
    vb_mgr_print_decision (json_node_get_object (json_parser_get_root (parser)));
  return VB_EXIT_OK;
}

static int
vb_mgr_policy_test (int argc, char **argv)
{
  g_auto (GStrv) props = NULL;
  g_autofree char *size_text = NULL;
  g_autofree char *metadata = NULL;
  g_autofree char *uuid = NULL;
  g_autofree char *name = NULL;
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "prop", 0, 0, G_OPTION_ARG_STRING_ARRAY, &props,
            N_ ("A udev property of the block device (repeatable)"), N_ ("KEY=VALUE") },
          { "size", 0, 0, G_OPTION_ARG_STRING, &size_text,
            N_ ("Its size: bytes, or a number with K, M, G or T"), N_ ("SIZE") },
          { "metadata", 0, 0, G_OPTION_ARG_STRING, &metadata,
            N_ ("What it carries: vblk, none (blank) or unknown (another signature)"),
            N_ ("METADATA") },
          { "uuid", 0, 0, G_OPTION_ARG_STRING, &uuid, N_ ("The device UUID in its vblk superblock"),
            N_ ("UUID") },
          { "name", 0, 0, G_OPTION_ARG_STRING, &name, N_ ("The device name in its vblk superblock"),
            N_ ("NAME") },
          { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr (GVariant) properties = NULL;
  g_autofree char *devnode = NULL;
  guint64 size;

  if (!vb_mgr_parse_options ("policy test", "[DEVICE]",
                             _ ("Say what the policy rules would do with a block device, without "
                                "acting. DEVICE (a block device path) is probed by vblkd, "
                                "read-only, for its size, udev properties and vblk superblock; "
                                "the options give these instead, or on top."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc > 2)
    return vb_mgr_usage_error ("policy test", _ ("unexpected argument '%s'"), argv[2]);
  if (argc < 2 && props == NULL && size_text == NULL && metadata == NULL && uuid == NULL
      && name == NULL)
    return vb_mgr_usage_error ("policy test", _ ("give a block device or --prop KEY=VALUE…"));
  properties = vb_mgr_parse_assignments ("policy test", (const char *const *) props);
  if (properties == NULL)
    return VB_EXIT_USAGE;
  if (argc == 2)
    {
      if (*argv[1] == '\0')
        return vb_mgr_usage_error ("policy test", _ ("the block device path is empty"));
      devnode = g_canonicalize_filename (argv[1], NULL);
      g_variant_builder_add (&options, "{sv}", "devnode", g_variant_new_string (devnode));
    }
  if (size_text != NULL)
    {
      if (!vb_size_parse (size_text, &size, NULL))
        return vb_mgr_usage_error ("policy test", _ ("--size: '%s' is not a size (e.g. 200G)"),
                                   size_text);
      g_variant_builder_add (&options, "{sv}", "size", g_variant_new_uint64 (size));
    }
  /* vblkd checks the values and names the bad one */
  if (metadata != NULL)
    g_variant_builder_add (&options, "{sv}", "metadata", g_variant_new_string (metadata));
  if (uuid != NULL)
    g_variant_builder_add (&options, "{sv}", "device-uuid", g_variant_new_string (uuid));
  if (name != NULL)
    g_variant_builder_add (&options, "{sv}", "device-name", g_variant_new_string (name));

  return vb_mgr_policy_evaluate (devnode, properties, &options, json);
}

/* vbmgr policy reload */

static int
vb_mgr_policy_reload (int argc, char **argv)
{
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusPolicy) policy = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GVariant) rules = NULL;
  g_autoptr (GError) error = NULL;

  if (!vb_mgr_parse_options ("policy reload", "",
                             _ ("Read the policy rules again. When a file has an error, the "
                                "rules in force stay and the error names the file and line."),
                             NULL, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc > 1)
    return vb_mgr_usage_error ("policy reload", _ ("unexpected argument '%s'"), argv[1]);

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  policy = vb_mgr_get_policy (manager, "policy reload");
  if (policy == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (policy, "Reload", g_variant_new ("(@a{sv})", g_variant_new ("a{sv}", NULL)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail ("policy reload", NULL, error);
  /* asked now, not from the cache: the change signal may still be on its way */
  rules = g_dbus_connection_call_sync (
      g_dbus_proxy_get_connection (G_DBUS_PROXY (policy)), VB_BUS_NAME, POLICY_PATH,
      "org.freedesktop.DBus.Properties", "Get",
      g_variant_new ("(ss)", "org.vblk.VBlk1.Policy", "Rules"), G_VARIANT_TYPE ("(v)"),
      G_DBUS_CALL_FLAGS_NONE, -1, NULL, NULL);
  if (rules != NULL)
    {
      g_autoptr (GVariant) value = NULL;

      g_variant_get (rules, "(v)", &value);
      gsize n = g_variant_n_children (value);

      g_print (ngettext ("Reloaded: %zu rule from %s\n", "Reloaded: %zu rules from %s\n", n), n,
               vb_dbus_policy_get_directory (policy));
    }
  return VB_EXIT_OK;
}

static const VbMgrCommand vb_mgr_policy_commands[] = {
  { "list", "[--json]", N_ ("List the rules in force"), vb_mgr_policy_list },
  { "test", "DEVICE | --prop K=V… [--size S] [--metadata M] [--uuid U] [--name N] [--json]",
    N_ ("Say what the rules would do with a block device"), vb_mgr_policy_test },
  { "reload", "", N_ ("Read the rule files again"), vb_mgr_policy_reload },
};

int
vb_cmd_policy (int argc, char **argv)
{
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL)
    return vb_mgr_usage_error ("policy", _ ("missing subcommand (list, test or reload)"));
  if (strcmp (sub, "--help") == 0 || strcmp (sub, "-h") == 0)
    {
      g_print ("%s\n\n", _ ("Usage: vbmgr policy SUBCOMMAND [ARGUMENT…]"));
      for (gsize i = 0; i < G_N_ELEMENTS (vb_mgr_policy_commands); i++)
        g_print ("  %s%s%s\n      %s\n", vb_mgr_policy_commands[i].name,
                 *vb_mgr_policy_commands[i].parameters ? " " : "",
                 vb_mgr_policy_commands[i].parameters, _ (vb_mgr_policy_commands[i].summary));
      return VB_EXIT_OK;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (vb_mgr_policy_commands); i++)
    if (strcmp (sub, vb_mgr_policy_commands[i].name) == 0)
      return vb_mgr_policy_commands[i].run (argc - 1, argv + 1);
  return vb_mgr_usage_error ("policy", _ ("unknown subcommand '%s' (list, test or reload)"), sub);
}
