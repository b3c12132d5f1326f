"""The VPA API rules shared by the admission webhook, the recommender and the updater."""
