"""Campaign files: parse/validate (parse.py) and matrix expansion (expand.py)."""

from tankbench.campaign.expand import expand
from tankbench.campaign.parse import Spec, load_spec, parse_spec

__all__ = ["Spec", "expand", "load_spec", "parse_spec"]
