"""Explanation quality: generated scenes with known answers, the demo model, metrics."""
