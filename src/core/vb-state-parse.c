/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading state.json (see vb-state.h): a strict parser of the schema that
 * names the place of every fault ("ORIGIN:LINE:COL" for syntax,
 * "ORIGIN: devices[2].driver" for the schema), refusing repeated keys. */
#include "config.h"

#include <glib/gi18n-lib.h>
#include <inttypes.h>

#include "vb-state.h"
#include "vb-state-record.h"

#include <string.h>

#include <json-glib/json-glib.h>

#include "vb-error.h"
#include "vb-options.h"
#include "vb-util.h"

/* ------------------------------------------------------------------ */
/* Parsing                                                              */

/* Sets a schema error at @path ("devices[2].driver"; "" is the top level). */
G_GNUC_PRINTF (4, 5)
static void
schema_error (GError **error, const char *origin, const char *path, const char *format, ...)
{
  g_autofree char *msg = NULL;
  va_list args;

  va_start (args, format);
  msg = g_strdup_vprintf (_ (format), args);
  va_end (args);
  if (*path != '\0')
    g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s: %s: %s", origin, path, msg);
  else
    g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s: %s", origin, msg);
}

/* "devices[0]" + "driver" -> "devices[0].driver"; keys that are not plain
 * identifiers are quoted so that the path stays readable. */
static char *
path_member (const char *path, const char *key)
{
  gboolean plain = *key != '\0';

  for (const char *p = key; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '_' && *p != '-')
      plain = FALSE;
  if (plain)
    return *path ? g_strdup_printf ("%s.%s", path, key) : g_strdup (key);
  else
    {
      g_autofree char *escaped = g_strescape (key, NULL);
      return g_strdup_printf ("%s[\"%s\"]", path, escaped);
    }
}

static gboolean
check_known_keys (JsonObject *object, const char *const *known, const char *origin,
                  const char *path, GError **error)
{
  g_autoptr (GList) members = json_object_get_members (object);

  /* Sorted, so that with several unknown keys the error is always the same. */
  members = g_list_sort (members, (GCompareFunc) g_strcmp0);
  for (GList *l = members; l; l = l->next)
    if (!g_strv_contains (known, l->data))
      {
        g_autofree char *escaped = g_strescape (l->data, NULL);
        schema_error (error, origin, path, "unknown key '%s'", escaped);
        return FALSE;
      }
  return TRUE;
}

static gboolean
expect_object (JsonNode *node, const char *origin, const char *path, JsonObject **object,
               GError **error)
{
  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      schema_error (error, origin, path, "expected an object");
      return FALSE;
    }
  *object = json_node_get_object (node);
  return TRUE;
}

static gboolean
expect_array (JsonNode *node, const char *origin, const char *path, JsonArray **array,
              GError **error)
{
  if (!JSON_NODE_HOLDS_ARRAY (node))
    {
      schema_error (error, origin, path, "expected an array");
      return FALSE;
    }
  *array = json_node_get_array (node);
  return TRUE;
}

static gboolean
expect_string (JsonNode *node, const char *origin, const char *path, gboolean non_empty,
               const char **value, GError **error)
{
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    {
      schema_error (error, origin, path, "expected a string");
      return FALSE;
    }
  *value = json_node_get_string (node);
  /* json-glib decodes escapes JSON does not have ("\222" is byte 0x92):
   * what is not UTF-8 goes no further (D-Bus and state.json carry UTF-8) */
  if (!g_utf8_validate (*value, -1, NULL))
    {
      schema_error (error, origin, path,
                    "not UTF-8 (an escape JSON does not have, such as \\222?)");
      return FALSE;
    }
  if (non_empty && **value == '\0')
    {
      schema_error (error, origin, path, "must not be empty");
      return FALSE;
    }
  return TRUE;
}

static gboolean
expect_boolean (JsonNode *node, const char *origin, const char *path, gboolean *value,
                GError **error)
{
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    {
      schema_error (error, origin, path, "expected true or false");
      return FALSE;
    }
  *value = json_node_get_boolean (node);
  return TRUE;
}

/* A required member: missing is an error at @path.@key. */
static JsonNode *
require_member (JsonObject *object, const char *key, const char *origin, const char *path,
                GError **error)
{
  JsonNode *node = json_object_get_member (object, key);

  if (node == NULL)
    {
      g_autofree char *member = path_member (path, key);
      schema_error (error, origin, member, "missing");
    }
  return node;
}

static gboolean
parse_required_string (JsonObject *object, const char *key, const char *origin, const char *path,
                       const char **value, GError **error)
{
  g_autofree char *member = path_member (path, key);
  JsonNode *node = require_member (object, key, origin, path, error);

  return node != NULL && expect_string (node, origin, member, TRUE, value, error);
}

static gboolean
parse_uuid (JsonObject *object, const char *origin, const char *path, const char **value,
            GError **error)
{
  g_autofree char *member = path_member (path, "uuid");

  if (!parse_required_string (object, "uuid", origin, path, value, error))
    return FALSE;
  if (!vb_uuid_is_valid (*value))
    {
      g_autofree char *escaped = g_strescape (*value, NULL);
      schema_error (error, origin, member, "'%s' is not a valid UUID", escaped);
      return FALSE;
    }
  return TRUE;
}

/* A slot number in canonical decimal (no sign, no leading zero), or "spare". */
static gboolean
role_is_valid (const char *role)
{
  guint64 slot;

  if (strcmp (role, "spare") == 0 || strcmp (role, "faulty") == 0)
    return TRUE;
  if (role[0] == '\0' || (role[0] == '0' && role[1] != '\0'))
    return FALSE;
  for (const char *p = role; *p; p++)
    if (!g_ascii_isdigit (*p))
      return FALSE;
  return g_ascii_string_to_unsigned (role, 10, 0, G_MAXINT, &slot, NULL);
}

/* A spec's component: "SOURCE", or {source, role, uuid} with role and uuid
 * optional (role NULL: the next slot, numbered by parse_components). */
static VbComponentConfig *
parse_spec_component (JsonNode *node, const char *origin, const char *path, GError **error)
{
  static const char *const known[] = { "source", "role", "uuid", NULL };
  const char *source, *role = NULL, *uuid = NULL;
  JsonObject *object;

  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    {
      if (!expect_string (node, origin, path, TRUE, &source, error))
        return NULL;
      return vb_component_config_new (source, NULL, NULL);
    }
  if (!expect_object (node, origin, path, &object, error)
      || !check_known_keys (object, known, origin, path, error)
      || !parse_required_string (object, "source", origin, path, &source, error))
    return NULL;
  if (json_object_has_member (object, "role")
      && !parse_required_string (object, "role", origin, path, &role, error))
    return NULL;
  if (role && !role_is_valid (role))
    {
      g_autofree char *member = path_member (path, "role");
      g_autofree char *escaped = g_strescape (role, NULL);
      schema_error (error, origin, member, "'%s' is not a slot number, \"spare\" or \"faulty\"",
                    escaped);
      return NULL;
    }
  if (json_object_has_member (object, "uuid") && !parse_uuid (object, origin, path, &uuid, error))
    return NULL;
  return vb_component_config_new (source, role, uuid);
}

static VbComponentConfig *
parse_component (JsonNode *node, const char *origin, const char *path, GError **error)
{
  static const char *const known[] = { "source", "role", "uuid", "in_sync", "faulty", NULL };
  JsonObject *object;
  JsonNode *in_sync_node, *faulty_node;
  const char *source, *role, *uuid;
  gboolean in_sync = TRUE, faulty = FALSE;
  VbComponentConfig *c;

  if (!expect_object (node, origin, path, &object, error)
      || !check_known_keys (object, known, origin, path, error)
      || !parse_required_string (object, "source", origin, path, &source, error)
      || !parse_required_string (object, "role", origin, path, &role, error))
    return NULL;
  if (!role_is_valid (role))
    {
      g_autofree char *member = path_member (path, "role");
      g_autofree char *escaped = g_strescape (role, NULL);
      schema_error (error, origin, member, "'%s' is not a slot number, \"spare\" or \"faulty\"",
                    escaped);
      return NULL;
    }
  if (!parse_uuid (object, origin, path, &uuid, error))
    return NULL;
  if ((in_sync_node = json_object_get_member (object, "in_sync")) != NULL)
    {
      g_autofree char *p = path_member (path, "in_sync");
      if (!expect_boolean (in_sync_node, origin, p, &in_sync, error))
        return NULL;
    }
  if ((faulty_node = json_object_get_member (object, "faulty")) != NULL)
    {
      g_autofree char *p = path_member (path, "faulty");
      if (!expect_boolean (faulty_node, origin, p, &faulty, error))
        return NULL;
    }
  if (faulty && in_sync)
    {
      g_autofree char *p = path_member (path, "faulty");
      schema_error (error, origin, p, "a faulty component cannot be in sync (\"in_sync\": false)");
      return NULL;
    }
  c = vb_component_config_new (source, role, uuid);
  c->behind = !in_sync;
  c->faulty = faulty;
  return c;
}

/* A spec's attribute value may be a number or a boolean too. */
static gboolean
spec_attribute_value (JsonNode *node, char **value)
{
  GType type = JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node) : G_TYPE_INVALID;

  if (type == G_TYPE_INT64)
    *value = g_strdup_printf ("%" G_GINT64_FORMAT, json_node_get_int (node));
  else if (type == G_TYPE_BOOLEAN)
    *value = g_strdup (json_node_get_boolean (node) ? "true" : "false");
  else
    return FALSE;
  return TRUE;
}

static gboolean
parse_attributes (JsonNode *node, const char *origin, const char *path, gboolean spec,
                  GHashTable *attributes, GError **error)
{
  JsonObject *object;
  g_autoptr (GList) members = NULL;

  if (!expect_object (node, origin, path, &object, error))
    return FALSE;
  members = g_list_sort (json_object_get_members (object), (GCompareFunc) g_strcmp0);
  for (GList *l = members; l; l = l->next)
    {
      const char *key = l->data;
      g_autofree char *member = path_member (path, key);
      JsonNode *member_node = json_object_get_member (object, key);
      const char *value;
      char *other;

      if (*key == '\0')
        {
          schema_error (error, origin, path, "empty attribute name");
          return FALSE;
        }
      if (spec && spec_attribute_value (member_node, &other))
        {
          g_hash_table_insert (attributes, g_strdup (key), other);
          continue;
        }
      if (spec
          && !(JSON_NODE_HOLDS_VALUE (member_node)
               && json_node_get_value_type (member_node) == G_TYPE_STRING))
        {
          schema_error (error, origin, member, "expected a string, a number or a boolean");
          return FALSE;
        }
      if (!expect_string (member_node, origin, member, FALSE, &value, error))
        return FALSE;
      g_hash_table_insert (attributes, g_strdup (key), g_strdup (value));
    }
  return TRUE;
}

/* A spec's component @c, item @item: a slot without a role takes the next
 * number (*@slots); a numbered one must be that number; slots come first. */
static gboolean
number_spec_slot (VbComponentConfig *c, const char *origin, const char *item, guint *slots,
                  gboolean *past_slots, GError **error)
{
  g_autofree char *member = path_member (item, "role");
  g_autofree char *expected = g_strdup_printf ("%u", *slots);

  if (c->role && !vb_component_config_is_slot (c))
    {
      *past_slots = TRUE;
      return TRUE;
    }
  if (*past_slots)
    {
      schema_error (error, origin, item, "a slot after a spare or faulty component (slots first)");
      return FALSE;
    }
  if (c->role && strcmp (c->role, expected) != 0)
    {
      schema_error (error, origin, member,
                    "slot %s listed as slot %s (slots are listed in order, from 0)", c->role,
                    expected);
      return FALSE;
    }
  if (c->role == NULL)
    c->role = g_steal_pointer (&expected);
  (*slots)++;
  return TRUE;
}

static gboolean
parse_components (JsonNode *node, const char *origin, const char *path, gboolean spec,
                  GPtrArray *components, GError **error)
{
  g_autoptr (GHashTable) sources = g_hash_table_new (g_str_hash, g_str_equal);
  gboolean past_slots = FALSE;
  guint slots = 0;
  JsonArray *array;

  if (!expect_array (node, origin, path, &array, error))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      g_autofree char *item = g_strdup_printf ("%s[%u]", path, i);
      VbComponentConfig *c;
      gpointer first;

      c = (spec ? parse_spec_component : parse_component) (json_array_get_element (array, i),
                                                           origin, item, error);
      if (c == NULL)
        return FALSE;
      g_ptr_array_add (components, c);
      if (spec && !number_spec_slot (c, origin, item, &slots, &past_slots, error))
        return FALSE;
      if (g_hash_table_lookup_extended (sources, c->source, NULL, &first))
        {
          g_autofree char *member = path_member (item, "source");
          schema_error (error, origin, member, "duplicate source '%s' (also %s[%u])", c->source,
                        path, GPOINTER_TO_UINT (first));
          return FALSE;
        }
      g_hash_table_insert (sources, c->source, GUINT_TO_POINTER (i));
    }
  return TRUE;
}

/* In the desired state an export is kept as vb_export_spec_format writes
 * it: one of a version before TLS ("nbd tcp:H:P") reads as the plaintext
 * it was ("nbd tcp:H:P tls=off"). A spec keeps what it says (Apply asks
 * it to say tls= on TCP). One that does not parse is kept as it is: its
 * export fails, with the reason, when it is to be served. */
static char *
export_as_kept (const char *text, gboolean spec)
{
  g_auto (VbExportSpec) e = { NULL };

  if (spec || !vb_export_spec_parse (text, &e, NULL))
    return g_strdup (text);
  return vb_export_spec_format (&e);
}

static gboolean
parse_exports (JsonNode *node, const char *origin, const char *path, gboolean spec,
               GPtrArray *exports, GError **error)
{
  JsonArray *array;

  if (!expect_array (node, origin, path, &array, error))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      g_autofree char *item = g_strdup_printf ("%s[%u]", path, i);
      const char *value;

      if (!expect_string (json_array_get_element (array, i), origin, item, TRUE, &value, error))
        return FALSE;
      g_ptr_array_add (exports, export_as_kept (value, spec));
    }
  return TRUE;
}

static VbDeviceConfig *
parse_device (JsonNode *node, const char *origin, const char *path, gboolean spec, GError **error)
{
  static const char *const known[]
      = { "name",       "uuid",    "driver",    "backend", "attributes",
          "components", "exports", "autostart", "started", NULL };
  g_autoptr (VbDeviceConfig) d = NULL;
  g_autofree char *name_path = path_member (path, "name");
  JsonObject *object;
  const char *name, *uuid = NULL, *driver, *backend = "auto";
  JsonNode *member;

  if (!expect_object (node, origin, path, &object, error)
      || !check_known_keys (object, known, origin, path, error))
    return NULL;

  if (!parse_required_string (object, "name", origin, path, &name, error))
    return NULL;
  if (!vb_name_is_valid (name, name_path, error))
    {
      g_prefix_error (error, "%s: ", origin);
      return NULL;
    }
  /* a spec names a device by its name; its UUID, when given, must agree */
  if ((!spec || json_object_has_member (object, "uuid"))
      && !parse_uuid (object, origin, path, &uuid, error))
    return NULL;
  if (!parse_required_string (object, "driver", origin, path, &driver, error))
    return NULL;
  if ((member = json_object_get_member (object, "backend")) != NULL)
    {
      g_autofree char *p = path_member (path, "backend");
      if (!expect_string (member, origin, p, TRUE, &backend, error))
        return NULL;
    }

  d = vb_device_config_new (name, uuid, driver, backend);
  d->started = spec; /* a spec's device runs unless it says otherwise */

  if ((member = json_object_get_member (object, "attributes")) != NULL)
    {
      g_autofree char *p = path_member (path, "attributes");
      if (!parse_attributes (member, origin, p, spec, d->attributes, error))
        return NULL;
    }
  if ((member = json_object_get_member (object, "components")) != NULL)
    {
      g_autofree char *p = path_member (path, "components");
      if (!parse_components (member, origin, p, spec, d->components, error))
        return NULL;
    }
  if ((member = json_object_get_member (object, "exports")) != NULL)
    {
      g_autofree char *p = path_member (path, "exports");
      if (!parse_exports (member, origin, p, spec, d->exports, error))
        return NULL;
    }
  if ((member = json_object_get_member (object, "autostart")) != NULL)
    {
      g_autofree char *p = path_member (path, "autostart");
      if (!expect_boolean (member, origin, p, &d->autostart, error))
        return NULL;
    }
  if ((member = json_object_get_member (object, "started")) != NULL)
    {
      g_autofree char *p = path_member (path, "started");
      if (!expect_boolean (member, origin, p, &d->started, error))
        return NULL;
    }
  return g_steal_pointer (&d);
}

static gboolean
parse_version (JsonObject *root, const char *origin, GError **error)
{
  JsonNode *node = require_member (root, "version", origin, "", error);
  gint64 version;

  if (node == NULL)
    return FALSE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    {
      schema_error (error, origin, "version", "expected an integer");
      return FALSE;
    }
  version = json_node_get_int (node);
  if (version != VB_STATE_VERSION)
    {
      schema_error (error, origin, "version", "unsupported version %" PRId64 " (expected %d)",
                    version, VB_STATE_VERSION);
      return FALSE;
    }
  return TRUE;
}

/* A journal record's "delete": names of devices the change deleted. */
static gboolean
parse_deletes (JsonNode *node, const char *origin, GPtrArray *deletes, GError **error)
{
  JsonArray *array;

  if (!expect_array (node, origin, "delete", &array, error))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      g_autofree char *path = g_strdup_printf ("delete[%u]", i);
      g_autoptr (GError) local = NULL;
      const char *name;

      if (!expect_string (json_array_get_element (array, i), origin, path, TRUE, &name, error))
        return FALSE;
      if (!vb_name_is_valid (name, "device", &local))
        {
          schema_error (error, origin, path, "%s", local->message);
          return FALSE;
        }
      g_ptr_array_add (deletes, g_strdup (name));
    }
  return TRUE;
}

/* @deletes: non-NULL for a journal record, which may say "delete" */
static VbState *
parse_state (JsonNode *root, const char *origin, gboolean spec, GPtrArray *deletes, GError **error)
{
  static const char *const known[] = { "version", "devices", NULL };
  static const char *const known_record[] = { "version", "devices", "delete", NULL };
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (GHashTable) names = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) uuids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  JsonObject *object;
  JsonArray *devices;
  JsonNode *node;

  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      schema_error (error, origin, "", "expected an object at the top level");
      return NULL;
    }
  object = json_node_get_object (root);
  if (!check_known_keys (object, deletes ? known_record : known, origin, "", error)
      || !parse_version (object, origin, error))
    return NULL;
  node = json_object_get_member (object, "delete");
  if (deletes && node && !parse_deletes (node, origin, deletes, error))
    return NULL;

  node = json_object_get_member (object, "devices");
  if (node == NULL)
    return g_steal_pointer (&state);
  if (!expect_array (node, origin, "devices", &devices, error))
    return NULL;
  for (guint i = 0; i < json_array_get_length (devices); i++)
    {
      g_autofree char *path = g_strdup_printf ("devices[%u]", i);
      VbDeviceConfig *d;
      gpointer first;

      d = parse_device (json_array_get_element (devices, i), origin, path, spec, error);
      if (d == NULL)
        return NULL;
      g_ptr_array_add (state->devices, d);
      if (g_hash_table_lookup_extended (names, d->name, NULL, &first))
        {
          g_autofree char *member = path_member (path, "name");
          schema_error (error, origin, member, "duplicate device name '%s' (also devices[%u])",
                        d->name, GPOINTER_TO_UINT (first));
          return NULL;
        }
      g_hash_table_insert (names, d->name, GUINT_TO_POINTER (i));
      /* UUIDs are compared case-insensitively: they name the same thing. */
      if (d->uuid)
        {
          g_autofree char *lower = g_ascii_strdown (d->uuid, -1);
          if (g_hash_table_lookup_extended (uuids, lower, NULL, &first))
            {
              g_autofree char *member = path_member (path, "uuid");
              schema_error (error, origin, member, "duplicate device UUID '%s' (also devices[%u])",
                            d->uuid, GPOINTER_TO_UINT (first));
              return NULL;
            }
          g_hash_table_insert (uuids, g_steal_pointer (&lower), GUINT_TO_POINTER (i));
        }
    }
  return g_steal_pointer (&state);
}

/* Line and column (1-based, in characters) of @pos in @text. */
static void
text_position (const char *text, const char *pos, guint *line, guint *col)
{
  *line = 1;
  *col = 1;
  for (const char *p = text; p < pos; p = g_utf8_next_char (p))
    {
      if (*p == '\n')
        {
          (*line)++;
          *col = 1;
        }
      else
        (*col)++;
    }
}

/* Where the first JSON value of @text (@len bytes) ends: after its closing
 * bracket or quote, or its literal's last character; NULL when it does not
 * end (json-glib then says what is wrong). Strings are skipped with their
 * escapes, so brackets in them do not count. */
static const char *
first_value_end (const char *text, gsize len)
{
  const char *p = text, *end = text + len;
  guint depth = 0;
  gboolean in_string = FALSE;

  while (p < end && g_ascii_isspace (*p))
    p++;
  if (p < end && *p != '{' && *p != '[' && *p != '"')
    {
      while (p < end && !g_ascii_isspace (*p) && !strchr ("{}[],:\"", *p))
        p++;
      return p;
    }
  for (; p < end; p++)
    {
      if (in_string)
        {
          if (*p == '\\' && p + 1 < end)
            p++;
          else if (*p == '"')
            {
              in_string = FALSE;
              if (depth == 0)
                return p + 1;
            }
        }
      else if (*p == '"')
        in_string = TRUE;
      else if (*p == '{' || *p == '[')
        depth++;
      else if ((*p == '}' || *p == ']') && depth > 0 && --depth == 0)
        return p + 1;
    }
  return NULL;
}

/* json-glib accepts repeated keys (the last wins); state.json must not
 * silently drop a setting, so the parser's signals are used to see them. */
typedef struct {
  GHashTable *seen;  /* JsonObject* -> GHashTable of member names */
  char *key;         /* first repeated key */
  gboolean not_utf8; /* or: the first key that is not UTF-8 (an escape) */
  guint line, col;
} DuplicateCheck;

static void
on_object_member (JsonParser *parser, JsonObject *object, const char *member_name,
                  gpointer user_data)
{
  DuplicateCheck *check = user_data;
  GHashTable *names;

  if (check->key != NULL)
    return;
  if (!g_utf8_validate (member_name, -1, NULL))
    {
      check->key = g_strdup ("");
      check->not_utf8 = TRUE;
      check->line = json_parser_get_current_line (parser);
      check->col = json_parser_get_current_pos (parser);
      return;
    }
  names = g_hash_table_lookup (check->seen, object);
  if (names == NULL)
    {
      names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_hash_table_insert (check->seen, object, names);
    }
  if (!g_hash_table_add (names, g_strdup (member_name)))
    {
      check->key = g_strdup (member_name);
      check->line = json_parser_get_current_line (parser);
      check->col = json_parser_get_current_pos (parser);
    }
}

static VbState *
parse_text (const char *text, gssize length, const char *origin, gboolean spec, GPtrArray *deletes,
            GError **error)
{
  g_autoptr (JsonParser) parser = NULL;
  g_autoptr (GError) local = NULL;
  DuplicateCheck check = { 0 };
  const char *end;
  gsize len;
  gboolean ok;
  VbState *state;

  g_return_val_if_fail (text != NULL || length == 0, NULL);
  g_return_val_if_fail (origin != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (text == NULL)
    text = "";
  len = length < 0 ? strlen (text) : (gsize) length;

  /* Checked here rather than by json-glib, whose message has no place. */
  if (!g_utf8_validate_len (text, len, &end))
    {
      guint line, col;

      text_position (text, end, &line, &col);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s:%u:%u: %s", origin, line, col,
                   *end == '\0' ? "NUL byte in the text" : "invalid UTF-8");
      return NULL;
    }

  /* One value and nothing after it, checked here too: json-glib 1.6 loses
   * the tree of the first of two top-level values (found by fuzz-state,
   * once GSlice no longer hid it from LeakSanitizer) */
  {
    const char *after = first_value_end (text, len), *p = after;
    while (p && p < text + len && g_ascii_isspace (*p))
      p++;
    if (p && p < text + len)
      {
        guint line, col;

        text_position (text, p, &line, &col);
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s:%u:%u: %s", origin, line, col,
                     _ ("text after the JSON value"));
        return NULL;
      }
  }

  parser = json_parser_new_immutable ();
  check.seen = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                      (GDestroyNotify) g_hash_table_unref);
  g_signal_connect (parser, "object-member", G_CALLBACK (on_object_member), &check);
  ok = json_parser_load_from_data (parser, text, (gssize) len, &local);
  g_signal_handlers_disconnect_by_data (parser, &check);
  g_clear_pointer (&check.seen, g_hash_table_unref);

  if (!ok)
    {
      /* json-glib writes "<data>:LINE:COL: Parse error: ..." and quotes
       * what it could not read as it decoded it: "\222", an octal escape
       * JSON does not have, comes out as byte 0x92 (found by fuzz-state).
       * The message reaches D-Bus callers (Apply), which take UTF-8 only. */
      const char *msg = local->message;
      g_autofree char *valid = NULL;

      if (g_str_has_prefix (msg, "<data>:"))
        msg += strlen ("<data>:");
      valid = g_utf8_make_valid (msg, -1);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s:%s", origin, valid);
      g_free (check.key);
      return NULL;
    }
  if (check.key != NULL && check.not_utf8)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s:%u:%u: a key that is not UTF-8 (an escape JSON does not have, such as "
                      "\\222?)"),
                   origin, check.line, check.col);
      g_free (check.key);
      return NULL;
    }
  if (check.key != NULL)
    {
      g_autofree char *escaped = g_strescape (check.key, NULL);

      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s:%u:%u: duplicate key '%s'"),
                   origin, check.line, check.col, escaped);
      g_free (check.key);
      return NULL;
    }
  if (json_parser_get_root (parser) == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s: empty, expected a JSON object"), origin);
      return NULL;
    }

  state = parse_state (json_parser_get_root (parser), origin, spec, deletes, error);
  return state;
}

VbState *
vb_state_from_json (const char *text, gssize length, const char *origin, GError **error)
{
  return parse_text (text, length, origin, FALSE, NULL, error);
}

VbState *
vb_spec_from_json (const char *text, gssize length, const char *origin, GError **error)
{
  return parse_text (text, length, origin, TRUE, NULL, error);
}

VbState *
vb_state_record_from_json (const char *text, gssize length, const char *origin, GPtrArray *deletes,
                           GError **error)
{
  g_return_val_if_fail (deletes != NULL, NULL);
  return parse_text (text, length, origin, FALSE, deletes, error);
}
