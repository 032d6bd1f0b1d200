/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy object and its decisions: which rule, if any, takes a block
 * device, and the human text of why. Also the duration syntax of rule
 * values (sizes are vb-size.h's). Parsing of rule files lives in
 * vb-policy-parse.c. */
#include "config.h"

#include "vb-policy-private.h"

#include <errno.h>
#include <string.h>

struct _VbPolicy {
  gatomicrefcount ref;
  GPtrArray *rules; /* VbPolicyRule* */
};

static const char *const action_names[] = {
  [VB_POLICY_ASSEMBLE] = "assemble", [VB_POLICY_READD] = "re-add",  [VB_POLICY_SPARE] = "spare",
  [VB_POLICY_REPLACE] = "replace",   [VB_POLICY_IGNORE] = "ignore",
};

const char *
vb_policy_action_to_string (VbPolicyAction a)
{
  g_return_val_if_fail ((guint) a < G_N_ELEMENTS (action_names), NULL);
  return action_names[a];
}

gboolean
vb_policy_action_from_string (const char *text, VbPolicyAction *out)
{
  for (guint i = 0; i < G_N_ELEMENTS (action_names); i++)
    if (strcmp (text, action_names[i]) == 0)
      {
        *out = (VbPolicyAction) i;
        return TRUE;
      }
  return FALSE;
}

/* Sizes and durations */

const char *
vb_policy_size_op_to_string (VbSizeOp op)
{
  static const char *const ops[] = {
    [VB_SIZE_LT] = "<",  [VB_SIZE_LE] = "<=", [VB_SIZE_GT] = ">",
    [VB_SIZE_GE] = ">=", [VB_SIZE_EQ] = "=",
  };

  g_return_val_if_fail ((guint) op < G_N_ELEMENTS (ops), NULL);
  return ops[op];
}

static const struct {
  const char *suffix;
  guint64 ms;
} duration_units[] = {
  { "h", 3600 * 1000 },
  { "m", 60 * 1000 },
  { "s", 1000 },
  { "ms", 1 },
};

gboolean
vb_policy_parse_duration (const char *text, guint64 *ms)
{
  char *end = NULL;
  guint64 v;

  if (g_ascii_strcasecmp (text, "never") == 0 || strcmp (text, "0") == 0)
    {
      *ms = 0;
      return TRUE;
    }
  if (!g_ascii_isdigit (*text))
    return FALSE;
  errno = 0;
  v = g_ascii_strtoull (text, &end, 10);
  if (errno != 0)
    return FALSE;
  /* A bare number has no unit: "30" could mean seconds or milliseconds. */
  for (guint i = 0; i < G_N_ELEMENTS (duration_units); i++)
    if (strcmp (end, duration_units[i].suffix) == 0)
      {
        if (v != 0 && duration_units[i].ms > G_MAXUINT64 / v)
          return FALSE;
        *ms = v * duration_units[i].ms;
        return TRUE;
      }
  return FALSE;
}

char *
vb_policy_format_duration (guint64 ms)
{
  if (ms == 0)
    return g_strdup ("never");
  for (guint i = 0; i < G_N_ELEMENTS (duration_units); i++)
    if (ms % duration_units[i].ms == 0)
      return g_strdup_printf ("%" G_GUINT64_FORMAT "%s", ms / duration_units[i].ms,
                              duration_units[i].suffix);
  g_assert_not_reached ();
}

/* Rules and the policy object */

void
vb_policy_match_free (VbPolicyMatch *m)
{
  if (m == NULL)
    return;
  g_free (m->property);
  g_free (m->pattern);
  g_clear_pointer (&m->spec, g_pattern_spec_free);
  g_free (m);
}

VbPolicyRule *
vb_policy_rule_new (const char *name, const char *file, guint line)
{
  VbPolicyRule *r = g_new0 (VbPolicyRule, 1);

  r->name = g_strdup (name);
  r->file = g_strdup (file);
  r->line = line;
  r->action = VB_POLICY_IGNORE;
  r->matches = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_policy_match_free);
  return r;
}

void
vb_policy_rule_free (VbPolicyRule *r)
{
  if (r == NULL)
    return;
  g_free (r->name);
  g_free (r->file);
  g_strfreev (r->devices);
  g_free (r->domain);
  g_ptr_array_unref (r->matches);
  g_free (r);
}

VbPolicy *
vb_policy_new_take (GPtrArray *rules)
{
  VbPolicy *p = g_new0 (VbPolicy, 1);

  g_atomic_ref_count_init (&p->ref);
  p->rules = rules;
  return p;
}

VbPolicy *
vb_policy_new_empty (void)
{
  return vb_policy_new_take (g_ptr_array_new_with_free_func ((GDestroyNotify) vb_policy_rule_free));
}

VbPolicy *
vb_policy_ref (VbPolicy *p)
{
  g_return_val_if_fail (p != NULL, NULL);
  g_atomic_ref_count_inc (&p->ref);
  return p;
}

void
vb_policy_unref (VbPolicy *p)
{
  g_return_if_fail (p != NULL);
  if (!g_atomic_ref_count_dec (&p->ref))
    return;
  g_ptr_array_unref (p->rules);
  g_free (p);
}

guint
vb_policy_n_rules (VbPolicy *p)
{
  g_return_val_if_fail (p != NULL, 0);
  return p->rules->len;
}

const VbPolicyRule *
vb_policy_rule (VbPolicy *p, guint i)
{
  g_return_val_if_fail (p != NULL, NULL);
  g_return_val_if_fail (i < p->rules->len, NULL);
  return p->rules->pdata[i];
}

char *
vb_policy_rule_to_string (const VbPolicyRule *r)
{
  GString *s;

  g_return_val_if_fail (r != NULL, NULL);

  s = g_string_new (NULL);
  g_string_append_printf (s, "%s (%s:%u): action=%s", r->name, r->file, r->line,
                          vb_policy_action_to_string (r->action));
  for (guint i = 0; i < r->matches->len; i++)
    {
      const VbPolicyMatch *m = r->matches->pdata[i];

      switch (m->kind)
        {
        case VB_MATCH_PROPERTY:
          g_string_append_printf (s, " match.%s=%s", m->property, m->pattern);
          break;
          case VB_MATCH_SIZE: {
            g_autofree char *size = vb_size_format (m->size);

            g_string_append_printf (s, " match.size=%s%s", vb_policy_size_op_to_string (m->op),
                                    size);
            break;
          }
        case VB_MATCH_METADATA:
          g_string_append_printf (s, " match.metadata=%s", m->pattern);
          break;
        case VB_MATCH_UUID:
          g_string_append_printf (s, " match.uuid=%s", m->pattern);
          break;
        case VB_MATCH_DEVICE:
          g_string_append_printf (s, " match.device=%s", m->pattern);
          break;
        }
    }
  if (r->devices != NULL)
    {
      g_autofree char *list = g_strjoinv (",", r->devices);

      g_string_append_printf (s, " devices=%s", list);
    }
  if (r->start_degraded_after_ms != 0)
    {
      g_autofree char *d = vb_policy_format_duration (r->start_degraded_after_ms);

      g_string_append_printf (s, " start-degraded-after=%s", d);
    }
  if (r->domain != NULL)
    g_string_append_printf (s, " domain=%s", r->domain);
  return g_string_free (s, FALSE);
}

/* Evaluation */

static gboolean
size_holds (VbSizeOp op, guint64 have, guint64 want)
{
  switch (op)
    {
    case VB_SIZE_LT:
      return have < want;
    case VB_SIZE_LE:
      return have <= want;
    case VB_SIZE_GT:
      return have > want;
    case VB_SIZE_GE:
      return have >= want;
    case VB_SIZE_EQ:
      return have == want;
    }
  g_assert_not_reached ();
}

/* A glob on a value that may be absent (a udev property, a superblock
 * field). Appends to @text what matched, or what was needed and what the
 * disk has; @what names the value as the rule does ("ID_BUS", "uuid"),
 * @absent says what the disk lacks. */
static gboolean
glob_holds (const VbPolicyMatch *m, const char *what, const char *value, const char *absent,
            GString *text)
{
  if (value == NULL)
    {
      g_string_append_printf (text, "needs %s='%s', the disk has %s", what, m->pattern, absent);
      return FALSE;
    }
  if (!g_pattern_spec_match_string (m->spec, value))
    {
      g_string_append_printf (text, "needs %s='%s', the disk has %s=%s", what, m->pattern, what,
                              value);
      return FALSE;
    }
  g_string_append_printf (text, "%s=%s matches '%s'", what, value, m->pattern);
  return TRUE;
}

static gboolean
match_holds (const VbPolicyMatch *m, const VbPolicyInput *in, GString *text)
{
  switch (m->kind)
    {
      case VB_MATCH_PROPERTY: {
        const char *value
            = in->properties != NULL ? g_hash_table_lookup (in->properties, m->property) : NULL;
        g_autofree char *absent = g_strdup_printf ("no %s", m->property);

        return glob_holds (m, m->property, value, absent, text);
      }
      case VB_MATCH_SIZE: {
        g_autofree char *have = vb_size_format (in->size);
        g_autofree char *want = vb_size_format (m->size);
        const char *op = vb_policy_size_op_to_string (m->op);

        if (!size_holds (m->op, in->size, m->size))
          {
            g_string_append_printf (text, "needs size %s %s, the disk has %s", op, want, have);
            return FALSE;
          }
        g_string_append_printf (text, "size %s %s %s", have, op, want);
        return TRUE;
      }
    case VB_MATCH_METADATA:
      if (strcmp (m->pattern, "any") == 0)
        {
          if (in->metadata != NULL)
            g_string_append_printf (text, "metadata=%s matches any", in->metadata);
          else
            g_string_append (text, "metadata (not known) matches any");
          return TRUE;
        }
      if (in->metadata == NULL)
        {
          g_string_append_printf (text, "needs metadata=%s, the disk's metadata is not known",
                                  m->pattern);
          return FALSE;
        }
      if (strcmp (in->metadata, m->pattern) != 0)
        {
          g_string_append_printf (text, "needs metadata=%s, the disk has %s", m->pattern,
                                  in->metadata);
          return FALSE;
        }
      g_string_append_printf (text, "metadata=%s", in->metadata);
      return TRUE;
    case VB_MATCH_UUID:
      return glob_holds (m, "uuid", in->device_uuid, "no vblk superblock", text);
    case VB_MATCH_DEVICE:
      return glob_holds (m, "device", in->device_name, "no vblk superblock", text);
    }
  g_assert_not_reached ();
}

/* All of @r's matches hold. On success @text gets what matched; on failure
 * only the first condition that failed (the others are not looked at). */
static gboolean
rule_holds (const VbPolicyRule *r, const VbPolicyInput *in, GString *text)
{
  gsize start = text->len;

  for (guint i = 0; i < r->matches->len; i++)
    {
      GString *one = g_string_new (NULL);
      gboolean holds = match_holds (r->matches->pdata[i], in, one);

      if (!holds)
        {
          g_string_truncate (text, start);
          g_string_append (text, one->str);
          g_string_free (one, TRUE);
          return FALSE;
        }
      g_string_append_printf (text, "%s%s", i > 0 ? ", " : "", one->str);
      g_string_free (one, TRUE);
    }
  if (r->matches->len == 0)
    g_string_append (text, "no match.* keys: matches every disk");
  return TRUE;
}

const VbPolicyRule *
vb_policy_evaluate (VbPolicy *p, const VbPolicyInput *in, char **why)
{
  g_autoptr (GString) misses = g_string_new (NULL);

  g_return_val_if_fail (p != NULL, NULL);
  g_return_val_if_fail (in != NULL, NULL);

  for (guint i = 0; i < p->rules->len; i++)
    {
      const VbPolicyRule *r = p->rules->pdata[i];
      g_autoptr (GString) text = g_string_new (NULL);

      if (rule_holds (r, in, text))
        {
          if (why != NULL)
            *why = g_strdup_printf ("rule '%s' (%s:%u): %s", r->name, r->file, r->line, text->str);
          return r;
        }
      g_string_append_printf (misses, "%s'%s' %s", i > 0 ? "; " : "", r->name, text->str);
    }
  if (why != NULL)
    *why = g_strdup_printf ("no rule matched: %s",
                            p->rules->len > 0 ? misses->str : "there are no rules");
  return NULL;
}
