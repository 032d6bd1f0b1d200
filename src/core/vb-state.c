/* The desired state (see vb-state.h): data structures, a strict parser of
 * state.json that names the place of every fault, the canonical writer,
 * and durable loading and saving. */
#include "config.h"

#include "vb-state.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "vb-error.h"
#include "vb-util.h"

/* ------------------------------------------------------------------ */
/* Data structures                                                      */

VbComponentConfig *
vb_component_config_new (const char *source, const char *role, const char *uuid)
{
  VbComponentConfig *c = g_new0 (VbComponentConfig, 1);

  c->source = g_strdup (source);
  c->role = g_strdup (role);
  c->uuid = g_strdup (uuid);
  return c;
}

gboolean
vb_component_config_is_slot (const VbComponentConfig *c)
{
  return g_ascii_isdigit (c->role[0]);
}

guint
vb_device_config_n_slots (const VbDeviceConfig *d)
{
  guint n = 0;

  for (guint i = 0; i < d->components->len; i++)
    n += vb_component_config_is_slot (d->components->pdata[i]);
  return n;
}

VbComponentConfig *
vb_component_config_copy (const VbComponentConfig *c)
{
  g_return_val_if_fail (c != NULL, NULL);

  VbComponentConfig *copy = vb_component_config_new (c->source, c->role, c->uuid);

  copy->behind = c->behind;
  copy->faulty = c->faulty;
  return copy;
}

void
vb_component_config_free (VbComponentConfig *c)
{
  if (c == NULL)
    return;
  g_free (c->source);
  g_free (c->role);
  g_free (c->uuid);
  g_free (c);
}

VbDeviceConfig *
vb_device_config_new (const char *name, const char *uuid, const char *driver, const char *backend)
{
  VbDeviceConfig *d = g_new0 (VbDeviceConfig, 1);

  d->name = g_strdup (name);
  d->uuid = g_strdup (uuid);
  d->driver = g_strdup (driver);
  d->backend = g_strdup (backend != NULL ? backend : "auto");
  d->attributes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  d->components = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_component_config_free);
  d->exports = g_ptr_array_new_with_free_func (g_free);
  d->autostart = TRUE;
  d->started = FALSE;
  return d;
}

VbDeviceConfig *
vb_device_config_copy (const VbDeviceConfig *d)
{
  VbDeviceConfig *copy;
  GHashTableIter iter;
  gpointer key, value;

  g_return_val_if_fail (d != NULL, NULL);

  copy = vb_device_config_new (d->name, d->uuid, d->driver, d->backend);
  g_hash_table_iter_init (&iter, d->attributes);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (copy->attributes, g_strdup (key), g_strdup (value));
  for (guint i = 0; i < d->components->len; i++)
    g_ptr_array_add (copy->components, vb_component_config_copy (d->components->pdata[i]));
  for (guint i = 0; i < d->exports->len; i++)
    g_ptr_array_add (copy->exports, g_strdup (d->exports->pdata[i]));
  copy->autostart = d->autostart;
  copy->started = d->started;
  return copy;
}

void
vb_device_config_free (VbDeviceConfig *d)
{
  if (d == NULL)
    return;
  g_free (d->name);
  g_free (d->uuid);
  g_free (d->driver);
  g_free (d->backend);
  g_hash_table_unref (d->attributes);
  g_ptr_array_unref (d->components);
  g_ptr_array_unref (d->exports);
  g_free (d);
}

static gboolean
attributes_equal (GHashTable *a, GHashTable *b)
{
  GHashTableIter iter;
  gpointer key, value;

  if (g_hash_table_size (a) != g_hash_table_size (b))
    return FALSE;
  g_hash_table_iter_init (&iter, a);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      const char *other;

      if (!g_hash_table_lookup_extended (b, key, NULL, (gpointer *) &other))
        return FALSE;
      if (g_strcmp0 (value, other) != 0)
        return FALSE;
    }
  return TRUE;
}

gboolean
vb_device_config_equal (const VbDeviceConfig *a, const VbDeviceConfig *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  if (g_strcmp0 (a->name, b->name) != 0 || g_strcmp0 (a->uuid, b->uuid) != 0
      || g_strcmp0 (a->driver, b->driver) != 0 || g_strcmp0 (a->backend, b->backend) != 0
      || !a->autostart != !b->autostart || !a->started != !b->started)
    return FALSE;
  if (!attributes_equal (a->attributes, b->attributes))
    return FALSE;
  if (a->components->len != b->components->len || a->exports->len != b->exports->len)
    return FALSE;
  for (guint i = 0; i < a->components->len; i++)
    {
      const VbComponentConfig *ca = a->components->pdata[i];
      const VbComponentConfig *cb = b->components->pdata[i];

      if (g_strcmp0 (ca->source, cb->source) != 0 || g_strcmp0 (ca->role, cb->role) != 0
          || g_strcmp0 (ca->uuid, cb->uuid) != 0 || !ca->behind != !cb->behind
          || !ca->faulty != !cb->faulty)
        return FALSE;
    }
  for (guint i = 0; i < a->exports->len; i++)
    if (g_strcmp0 (a->exports->pdata[i], b->exports->pdata[i]) != 0)
      return FALSE;
  return TRUE;
}

VbState *
vb_state_new (void)
{
  VbState *state = g_new0 (VbState, 1);

  state->devices = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_device_config_free);
  return state;
}

VbState *
vb_state_copy (const VbState *state)
{
  VbState *copy;

  g_return_val_if_fail (state != NULL, NULL);

  copy = vb_state_new ();
  for (guint i = 0; i < state->devices->len; i++)
    g_ptr_array_add (copy->devices, vb_device_config_copy (state->devices->pdata[i]));
  return copy;
}

void
vb_state_free (VbState *state)
{
  if (state == NULL)
    return;
  g_ptr_array_unref (state->devices);
  g_free (state);
}

gint
vb_state_index_of (const VbState *state, const char *name)
{
  g_return_val_if_fail (state != NULL, -1);
  g_return_val_if_fail (name != NULL, -1);

  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];

      if (g_strcmp0 (d->name, name) == 0)
        return (gint) i;
    }
  return -1;
}

VbDeviceConfig *
vb_state_lookup (const VbState *state, const char *name)
{
  gint i = vb_state_index_of (state, name);

  return i < 0 ? NULL : state->devices->pdata[i];
}

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
  msg = g_strdup_vprintf (format, args);
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

static gboolean
parse_attributes (JsonNode *node, const char *origin, const char *path, GHashTable *attributes,
                  GError **error)
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
      const char *value;

      if (*key == '\0')
        {
          schema_error (error, origin, path, "empty attribute name");
          return FALSE;
        }
      if (!expect_string (json_object_get_member (object, key), origin, member, FALSE, &value,
                          error))
        return FALSE;
      g_hash_table_insert (attributes, g_strdup (key), g_strdup (value));
    }
  return TRUE;
}

static gboolean
parse_components (JsonNode *node, const char *origin, const char *path, GPtrArray *components,
                  GError **error)
{
  g_autoptr (GHashTable) sources = g_hash_table_new (g_str_hash, g_str_equal);
  JsonArray *array;

  if (!expect_array (node, origin, path, &array, error))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      g_autofree char *item = g_strdup_printf ("%s[%u]", path, i);
      VbComponentConfig *c;
      gpointer first;

      c = parse_component (json_array_get_element (array, i), origin, item, error);
      if (c == NULL)
        return FALSE;
      g_ptr_array_add (components, c);
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

static gboolean
parse_exports (JsonNode *node, const char *origin, const char *path, GPtrArray *exports,
               GError **error)
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
      g_ptr_array_add (exports, g_strdup (value));
    }
  return TRUE;
}

static VbDeviceConfig *
parse_device (JsonNode *node, const char *origin, const char *path, GError **error)
{
  static const char *const known[]
      = { "name",       "uuid",    "driver",    "backend", "attributes",
          "components", "exports", "autostart", "started", NULL };
  g_autoptr (VbDeviceConfig) d = NULL;
  g_autofree char *name_path = path_member (path, "name");
  JsonObject *object;
  const char *name, *uuid, *driver, *backend = "auto";
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
  if (!parse_uuid (object, origin, path, &uuid, error)
      || !parse_required_string (object, "driver", origin, path, &driver, error))
    return NULL;
  if ((member = json_object_get_member (object, "backend")) != NULL)
    {
      g_autofree char *p = path_member (path, "backend");
      if (!expect_string (member, origin, p, TRUE, &backend, error))
        return NULL;
    }

  d = vb_device_config_new (name, uuid, driver, backend);

  if ((member = json_object_get_member (object, "attributes")) != NULL)
    {
      g_autofree char *p = path_member (path, "attributes");
      if (!parse_attributes (member, origin, p, d->attributes, error))
        return NULL;
    }
  if ((member = json_object_get_member (object, "components")) != NULL)
    {
      g_autofree char *p = path_member (path, "components");
      if (!parse_components (member, origin, p, d->components, error))
        return NULL;
    }
  if ((member = json_object_get_member (object, "exports")) != NULL)
    {
      g_autofree char *p = path_member (path, "exports");
      if (!parse_exports (member, origin, p, d->exports, error))
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
      schema_error (error, origin, "version",
                    "unsupported version %" G_GINT64_FORMAT " (expected %d)", version,
                    VB_STATE_VERSION);
      return FALSE;
    }
  return TRUE;
}

static VbState *
parse_state (JsonNode *root, const char *origin, GError **error)
{
  static const char *const known[] = { "version", "devices", NULL };
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
  if (!check_known_keys (object, known, origin, "", error)
      || !parse_version (object, origin, error))
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

      d = parse_device (json_array_get_element (devices, i), origin, path, error);
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

/* json-glib accepts repeated keys (the last wins); state.json must not
 * silently drop a setting, so the parser's signals are used to see them. */
typedef struct {
  GHashTable *seen; /* JsonObject* -> GHashTable of member names */
  char *key;        /* first repeated key */
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

VbState *
vb_state_from_json (const char *text, gssize length, const char *origin, GError **error)
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

  parser = json_parser_new_immutable ();
  check.seen = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                      (GDestroyNotify) g_hash_table_unref);
  g_signal_connect (parser, "object-member", G_CALLBACK (on_object_member), &check);
  ok = json_parser_load_from_data (parser, text, (gssize) len, &local);
  g_signal_handlers_disconnect_by_data (parser, &check);
  g_clear_pointer (&check.seen, g_hash_table_unref);

  if (!ok)
    {
      /* json-glib writes "<data>:LINE:COL: Parse error: ..." */
      const char *msg = local->message;

      if (g_str_has_prefix (msg, "<data>:"))
        msg += strlen ("<data>:");
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s:%s", origin, msg);
      g_free (check.key);
      return NULL;
    }
  if (check.key != NULL)
    {
      g_autofree char *escaped = g_strescape (check.key, NULL);

      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s:%u:%u: duplicate key '%s'",
                   origin, check.line, check.col, escaped);
      g_free (check.key);
      return NULL;
    }
  if (json_parser_get_root (parser) == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s: empty, expected a JSON object",
                   origin);
      return NULL;
    }

  state = parse_state (json_parser_get_root (parser), origin, error);
  return state;
}

/* ------------------------------------------------------------------ */
/* Writing                                                              */

static void
build_device (JsonBuilder *b, const VbDeviceConfig *d)
{
  g_autoptr (GList) keys = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, d->name);
  json_builder_set_member_name (b, "uuid");
  json_builder_add_string_value (b, d->uuid);
  json_builder_set_member_name (b, "driver");
  json_builder_add_string_value (b, d->driver);
  json_builder_set_member_name (b, "backend");
  json_builder_add_string_value (b, d->backend);

  json_builder_set_member_name (b, "attributes");
  json_builder_begin_object (b);
  keys = g_list_sort (g_hash_table_get_keys (d->attributes), (GCompareFunc) g_strcmp0);
  for (GList *l = keys; l; l = l->next)
    {
      const char *key = l->data;

      json_builder_set_member_name (b, key);
      json_builder_add_string_value (b, g_hash_table_lookup (d->attributes, key));
    }
  json_builder_end_object (b);

  json_builder_set_member_name (b, "components");
  json_builder_begin_array (b);
  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "source");
      json_builder_add_string_value (b, c->source);
      json_builder_set_member_name (b, "role");
      json_builder_add_string_value (b, c->role);
      json_builder_set_member_name (b, "uuid");
      json_builder_add_string_value (b, c->uuid);
      if (c->behind)
        {
          json_builder_set_member_name (b, "in_sync");
          json_builder_add_boolean_value (b, FALSE);
        }
      if (c->faulty)
        {
          json_builder_set_member_name (b, "faulty");
          json_builder_add_boolean_value (b, TRUE);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "exports");
  json_builder_begin_array (b);
  for (guint i = 0; i < d->exports->len; i++)
    json_builder_add_string_value (b, d->exports->pdata[i]);
  json_builder_end_array (b);

  json_builder_set_member_name (b, "autostart");
  json_builder_add_boolean_value (b, d->autostart);
  json_builder_set_member_name (b, "started");
  json_builder_add_boolean_value (b, d->started);
  json_builder_end_object (b);
}

char *
vb_state_to_json (const VbState *state)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  g_return_val_if_fail (state != NULL, NULL);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, VB_STATE_VERSION);
  json_builder_set_member_name (b, "devices");
  json_builder_begin_array (b);
  for (guint i = 0; i < state->devices->len; i++)
    build_device (b, state->devices->pdata[i]);
  json_builder_end_array (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_indent (gen, 2);
  text = json_generator_to_data (gen, NULL);
  return g_strconcat (text, "\n", NULL);
}

/* ------------------------------------------------------------------ */
/* Files                                                                */

VbState *
vb_state_load (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local = NULL;
  gsize length = 0;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!g_file_get_contents (path, &text, &length, &local))
    {
      if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return vb_state_new ();
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", path, local->message);
      return NULL;
    }
  return vb_state_from_json (text, (gssize) length, path, error);
}

static gboolean
fsync_directory (const char *dir, GError **error)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    {
      int saved = errno;

      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", dir, g_strerror (saved));
      return FALSE;
    }
  if (fsync (fd) < 0)
    {
      int saved = errno;

      close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: fsync: %s", dir, g_strerror (saved));
      return FALSE;
    }
  close (fd);
  return TRUE;
}

gboolean
vb_state_save (const VbState *state, const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autofree char *dir = NULL;
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (state != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  text = vb_state_to_json (state);
  /* what a later vblkd would refuse to load is never written: the change
   * that led to it is refused instead (the old file stays) */
  {
    g_autoptr (VbState) back = vb_state_from_json (text, -1, "the state to save", &local);
    if (back == NULL)
      {
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     "%s: not saved, it would not load again: %s", path, local->message);
        return FALSE;
      }
  }
  /* CONSISTENT|DURABLE: temp file in the same directory, fsync, rename. */
  if (!g_file_set_contents_full (path, text, -1,
                                 G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0600,
                                 &local))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", path, local->message);
      return FALSE;
    }
  /* Not every GLib version fsyncs the directory after the rename; doing it
   * here makes the rename durable whatever the version. */
  dir = g_path_get_dirname (path);
  if (!fsync_directory (dir, error))
    {
      g_prefix_error (error, "%s: ", path);
      return FALSE;
    }
  return TRUE;
}
