"""replcheck package."""
