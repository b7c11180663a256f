"""What two or more mechanisms share and no other part of the library needs: the ``move_cursor`` action kind and
the cursor mechanisms' report (expiry and backlog quota). Like ``spark_apps/shared``; never a mechanism itself."""
