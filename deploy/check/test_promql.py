"""Unit tests of promql.py's metric-name extraction and Grafana substitutions:
`python -m unittest deploy/check/test_promql.py` (deploy/check.sh runs them)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promql  # noqa: E402


class MetricNames(unittest.TestCase):
    def test_selectors_functions_and_aggregations(self):
        self.assertEqual(
            promql.metric_names(
                'sum by (stream, reason) (rate(ldpstream_reports_rejected_total{stream=~".*"}[15s]))'
            ),
            {"ldpstream_reports_rejected_total"},
        )

    def test_vector_matching_and_keywords(self):
        self.assertEqual(
            promql.metric_names("a / on(x) group_left(y) b offset 5m > bool 3 and c unless d"),
            {"a", "b", "c", "d"},
        )

    def test_numbers_with_letters_are_not_names(self):
        self.assertEqual(
            promql.metric_names("predict_linear(m[6h], 86400) <= 0 and n > 1e-6"), {"m", "n"}
        )

    def test_label_values_with_braces_and_quotes(self):
        self.assertEqual(promql.metric_names('x:y_z{a="b}c",d=~"e\\"f"} > 0'), {"x:y_z"})

    def test_histogram_suffix_maps_to_family(self):
        exported = {"ldpstream_snapshot_duration_seconds"}
        self.assertEqual(
            promql.base_name("ldpstream_snapshot_duration_seconds_bucket", exported),
            "ldpstream_snapshot_duration_seconds",
        )
        self.assertEqual(promql.base_name("ldpstream_reports_total", exported), "ldpstream_reports_total")


class Substitutions(unittest.TestCase):
    def test_longest_variable_first(self):
        self.assertEqual(
            promql.substitute('rate(m{stream=~"$stream"}[$__rate_interval])'),
            'rate(m{stream=~".*"}[15s])',
        )

    def test_label_values(self):
        self.assertEqual(
            promql.label_values_query('label_values(m{stream=~"$stream"}, test)'),
            ('m{stream=~"$stream"}', "test"),
        )
        with self.assertRaises(ValueError):
            promql.label_values_query("query_result(m)")


if __name__ == "__main__":
    unittest.main()
