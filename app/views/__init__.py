"""The explorer's views: each module builds one view's components from plain data."""
